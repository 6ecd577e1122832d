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
from accel.service.executors._visibility import placed_devices


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
    devices = ex.hosts()[0].devices
    assert len(devices) == 4
    # The job's page charts read its devices through the executor's own session.
    placed = placed_devices(ex.hosts()[0], [devices[2].id])
    (reading,) = ex.telemetry(placed)
    assert reading.device_id == devices[2].id and reading.memory_used_bytes is not None
    assert ex.telemetry(()) == []
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
