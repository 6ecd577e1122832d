"""The executors of ``accel serve``: ``sim``, ``local`` and ``slurm`` (DESIGN §11)."""

from __future__ import annotations

__all__: list[str] = []
