"""One scorer registry: a table of built-ins, the entry-point group, nothing registered by import."""

from __future__ import annotations

import ast
import importlib
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import accel.scheduler
from accel.scheduler import (
    BUILTIN_SCORERS,
    ENTRY_POINT_GROUP,
    Scorer,
    UnknownScorerError,
    available_scorers,
    make_scorer,
    register_scorer,
)
from accel.scheduler.queueing import QueueingScheduler


def test_every_builtin_works_in_a_fresh_interpreter() -> None:
    # each name in its own fresh interpreter state would cost a process each: instead the first
    # call is the one under test (fewest-free, whose module nothing imports), then all the others
    code = textwrap.dedent("""
        import json, sys
        from accel.scheduler import BUILTIN_SCORERS, make_scorer
        assert "accel.scheduler.queueing" not in sys.modules
        first = make_scorer("fewest-free")
        made = {n: type(make_scorer(n)).__name__ for n in BUILTIN_SCORERS}
        print(json.dumps({"first": first.name, "made": made}))
    """)
    out = json.loads(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                                    check=True).stdout)
    assert out["first"] == "fewest-free"
    assert set(out["made"]) == set(BUILTIN_SCORERS)


@pytest.mark.parametrize("name", sorted(BUILTIN_SCORERS))
def test_builtin_table_entry_names_its_own_class(name: str) -> None:
    module, _, attr = BUILTIN_SCORERS[name].partition(":")
    cls = getattr(importlib.import_module(module), attr)
    assert isinstance(cls, type) and issubclass(cls, Scorer)
    assert cls.name == name
    assert name in available_scorers()


def test_no_module_registers_a_scorer_when_imported() -> None:
    root = Path(accel.scheduler.__file__).parent
    offenders = []
    for path in root.rglob("*.py"):
        for node in ast.parse(path.read_text(), filename=str(path)).body:  # module level only
            if (isinstance(node, ast.Expr) and isinstance(node.value, ast.Call)
                    and getattr(node.value.func, "id", getattr(node.value.func, "attr", "")) == "register_scorer"):
                offenders.append(f"{path.relative_to(root)}:{node.lineno}")
            if isinstance(node, ast.For) and "register_scorer" in ast.unparse(node):
                offenders.append(f"{path.relative_to(root)}:{node.lineno}")
    assert offenders == []


def test_queueing_engine_default_is_a_builtin() -> None:
    import inspect

    default = inspect.signature(QueueingScheduler).parameters["scorer"].default
    assert default in BUILTIN_SCORERS


def test_unknown_name_is_a_typed_error_naming_the_known_ones() -> None:
    with pytest.raises(UnknownScorerError, match=r"unknown scorer 'no-such'.*fewest-free") as exc:
        make_scorer("no-such")
    assert exc.value.code == "scheduler.unknown-scorer"


def test_old_error_name_still_imports_with_a_deprecation_warning() -> None:
    with pytest.warns(DeprecationWarning, match="UnknownScorerError"):
        from accel.scheduler import UnknownPolicyError
    assert UnknownPolicyError is UnknownScorerError
    assert "UnknownPolicyError" not in accel.scheduler.__all__


def test_register_scorer_is_per_process_and_wins() -> None:
    class Mine(accel.scheduler.BestFitScorer):
        name = "test-registry-mine"

    assert "test-registry-mine" not in available_scorers()
    register_scorer(Mine.name, Mine)
    try:
        assert isinstance(make_scorer("test-registry-mine"), Mine)
        assert "test-registry-mine" in available_scorers()
    finally:
        from accel.scheduler import _registry

        del _registry._REGISTERED[Mine.name]


def test_entry_point_group_adds_scorers_but_not_over_builtins(tmp_path: Path) -> None:
    (tmp_path / "my_scorers.py").write_text(textwrap.dedent("""
        from accel.scheduler import SpreadScorer

        class Packer(SpreadScorer):
            name = "my-packer"

        NOT_A_SCORER = 42
    """))
    dist = tmp_path / "my_scorers-0.1.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: my-scorers\nVersion: 0.1\n")
    (dist / "entry_points.txt").write_text(
        f"[{ENTRY_POINT_GROUP}]\nmy-packer = my_scorers:Packer\nbest-fit = my_scorers:Packer\n"
        "broken = my_scorers:NOT_A_SCORER\n")
    code = textwrap.dedent("""
        import json
        from accel.scheduler import UnknownScorerError, available_scorers, make_scorer
        try:
            make_scorer("broken")
            broken = None
        except UnknownScorerError as exc:
            broken = str(exc)
        print(json.dumps({"mine": type(make_scorer("my-packer")).__name__,
                          "builtin": type(make_scorer("best-fit")).__name__,
                          "listed": "my-packer" in available_scorers(), "broken": broken}))
    """)
    out = json.loads(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                                    env={**os.environ, "PYTHONPATH": str(tmp_path)}).stdout)
    assert out == {"mine": "Packer", "builtin": "BestFitScorer", "listed": True,
                   "broken": "scorer 'broken' (accel.scheduler.scorers entry point) does not name a Scorer"}
