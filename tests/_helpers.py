"""Small helpers shared by several test packages (processes the tests start, benchmark modules)."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import ModuleType


def stop(proc: subprocess.Popen[bytes]) -> None:
    """Stop a process a test started: SIGTERM, then SIGKILL after 10 s; close its pipes."""
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)
    for stream in (proc.stdout, proc.stderr):
        if stream is not None:
            stream.close()


@contextmanager
def loaded_script(path: Path, name: str) -> Iterator[ModuleType]:
    """A benchmark script (not a package module) imported under ``name`` for the duration."""
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    try:
        spec.loader.exec_module(module)
        yield module
    finally:
        sys.modules.pop(spec.name, None)
