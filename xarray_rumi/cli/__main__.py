"""``python -m xarray_rumi.cli``: the ``rumi`` command, where its script is not on the path."""

import sys

from . import main

sys.exit(main())
