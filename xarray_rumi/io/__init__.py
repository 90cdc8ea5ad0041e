"""Bytes from anywhere: exact byte ranges of a path or URL (``source``) and how
remote reads are retried (``retry``).

Retries are logged at INFO under the ``xarray_rumi.io`` logger.
"""
