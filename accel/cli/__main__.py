"""``python -m accel.cli`` is the ``accel`` command too."""

import sys

from . import main

sys.exit(main())
