"""The xarray face: the ``rumi`` engine, Cubes, catalogs and collections."""
