"""``python -m accel`` is the ``accel`` command."""

import sys

from .cli import main

sys.exit(main())
