"""The factories the service's executor registry calls: ``build(context)`` in each module."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from accel.errors import ConfigError
from accel.service import Executor, ExecutorError
from accel.service.executors import _local, _slurm


@dataclass(frozen=True)
class Context:
    """The fields of the service's ExecutorContext that the factories read."""

    log_root: Path
    options: Mapping[str, object] = field(default_factory=dict)


def test_build_local(tmp_path: Path) -> None:
    root = os.geteuid() == 0
    ctx = Context(tmp_path / "state" / "logs", {"inventory": "sim:rtx4090-4", "allow_root": root})
    ex = _local.build(ctx)
    assert isinstance(ex, Executor) and ex.name == "local"
    assert len(ex.hosts()[0].devices) == 4
    assert (tmp_path / "state" / "executor-local").is_dir()
    with pytest.raises(ConfigError, match="allow_root must be true or false"):
        _local.build(Context(tmp_path, {"allow_root": "yes"}))
    with pytest.raises(ConfigError, match="inventory must be a string"):
        _local.build(Context(tmp_path, {"inventory": 3, "allow_root": root}))
    if root:
        with pytest.raises(ExecutorError, match="--run-as"):
            _local.build(Context(tmp_path, {"inventory": "sim:rtx4090-4"}))


def test_build_slurm(tmp_path: Path) -> None:
    ctx = Context(tmp_path / "logs", {"nodes": "sim:dgx-h100", "state_dir": str(tmp_path / "s"), "partition": "main"})
    ex = _slurm.build(ctx)
    assert isinstance(ex, Executor) and ex.name == "slurm"
    assert (tmp_path / "s").is_dir()
    with pytest.raises(ConfigError, match="option nodes"):
        _slurm.build(Context(tmp_path))
