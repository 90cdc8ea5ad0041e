"""Bytes from anywhere: exact byte ranges of a path or URL (``source``), how
remote reads are retried (``retry``), and paths and URLs told apart (``urls``).

Retries are logged at INFO under the ``xarray_rumi.io`` logger.
"""
