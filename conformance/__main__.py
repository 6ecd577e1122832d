"""``python -m accel.conformance run|report|matrix``."""

from ._cli import main

raise SystemExit(main())
