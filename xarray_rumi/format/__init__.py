"""rumi 0.1.0 as pure functions and small value types: no I/O, no xarray."""
