"""``python -m accel.conformance.matrix --all --out docs/conformance/``: regenerate the combined matrix."""

from __future__ import annotations

from ._cli import matrix_main

__all__ = ["matrix_main"]

if __name__ == "__main__":
    raise SystemExit(matrix_main())
