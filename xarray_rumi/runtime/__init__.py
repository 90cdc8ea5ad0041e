"""The process the package runs in: its threads (``threads``, the one module that starts them) and its
allocator (``heap``, glibc tuned where Dask workers trim the heap eagerly; ``XARRAY_RUMI_HEAP_TUNING=0`` declines).
"""
