"""The process the package runs in: its threads (``threads``, the one module that starts them) and its
allocator (``heap``, glibc tuned where Dask workers trim the heap eagerly).
"""
