"""The xarray face: the ``rumi`` engine, coordinates, Cubes, catalogs and collections."""
