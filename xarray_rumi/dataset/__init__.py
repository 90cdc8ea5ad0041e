"""Opening in xarray: the ``rumi`` engine, Cubes, catalogs and collections."""
