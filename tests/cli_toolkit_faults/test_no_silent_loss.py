"""No silent losses (issue 13): mutating a real sample never loses a device without a problem.

Every CLI plugin reads its shipped replay of a real output; Hypothesis mangles one line of the
main command's stdout (a slice replaced by other text, or the line deleted).  Whatever the
parser makes of it, a device that disappears must be explained: fewer devices than the clean
read only with at least one typed ``inventory.problems`` entry, or with the backend refusing
the whole output with a typed error.
"""

from __future__ import annotations

import importlib
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from accel.errors import AccelError
from accel.plugin import BackendConfig
from accel.tools import Recording, ReplayRunner

# Every plugin still loses devices silently under some mutation (first found, 2026-12-03):
# a deleted header line (mthreads), a rule replaced by a copy of another device's row, so the
# duplicate is dropped without a problem (metax, iluvatar, kunlunxin, hygon, ascend), a
# truncated cell that unframes the table (enflame), a row replaced by the next one (cambricon).
# Strict: when a plugin is fixed, its xfail must go.  Deterministic (derandomize) so it is.
_GAP = "silent device loss under mutation, found by this test; the rest of issue 13 (no-silent-loss per plugin)"
CASES = [
    pytest.param(name, scenario, argv, id=name, marks=pytest.mark.xfail(strict=True, reason=_GAP))
    for name, scenario, argv in [
        ("mthreads", "s5000-8", ("mthreads-gmi",)),
        ("metax", "c550-8", ("mx-smi",)),
        ("iluvatar", "bi-v150-16", ("ixsmi",)),
        ("kunlunxin", "p800-8", None),
        ("enflame", "s60-2dev", ("efsmi",)),
        ("cambricon", "mlu370-x8", ("cnmon",)),
        ("hygon", "k100-8dcu", None),
        ("ascend", "910b-8", ("npu-smi", "info")),
    ]
]


def _recordings(backend: str, scenario: str) -> list[Recording]:
    mod = importlib.import_module(f"accel.plugins.{backend}")
    assert mod.__file__ is not None
    runner = ReplayRunner(Path(mod.__file__).parent / "scenarios" / scenario)
    return list(runner._table.values())


def _main(recs: list[Recording], argv: tuple[str, ...] | None) -> Recording:
    if argv is not None:
        return next(r for r in recs if (Path(r.argv[0]).name, *r.argv[1:]) == argv)
    # The longest successful output is the device list.
    return max((r for r in recs if r.returncode == 0), key=lambda r: len(r.stdout))


def _read(backend: str, recs: list[Recording]) -> tuple[int, int] | None:
    plugin = importlib.import_module(f"accel.plugins.{backend}").PLUGIN
    try:
        be = plugin.open(BackendConfig(runner=ReplayRunner.from_recordings(recs), enrich_from_sysfs=False))
        inv = be.inventory()
    except AccelError:
        return None  # a typed refusal of the whole output is loud, not silent
    return len(inv.devices), len(inv.problems)


_NOISE = st.text(alphabet=st.sampled_from(list("x|:/ -0123456789ABCDEFabcdefN/A%WC")), max_size=12)


@pytest.mark.parametrize(("backend", "scenario", "argv"), CASES)
@settings(
    max_examples=60, deadline=None, derandomize=True, database=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(data=st.data())
def test_a_mangled_line_never_loses_a_device_silently(
    backend: str, scenario: str, argv: tuple[str, ...] | None, data: st.DataObject
) -> None:
    recs = _recordings(backend, scenario)
    main = _main(recs, argv)
    clean = _read(backend, recs)
    assert clean is not None and clean[1] == 0
    lines = main.stdout.splitlines()
    i = data.draw(st.integers(0, len(lines) - 1), label="line")
    line = lines[i]
    if data.draw(st.booleans(), label="delete"):
        lines[i : i + 1] = []
    else:
        a = data.draw(st.integers(0, len(line)), label="start")
        b = data.draw(st.integers(a, min(len(line), a + 16)), label="end")
        lines[i] = line[:a] + data.draw(_NOISE, label="noise") + line[b:]
    mangled = Recording(argv=main.argv, stdout="\n".join(lines) + "\n", stderr=main.stderr, returncode=main.returncode)
    got = _read(backend, [mangled if r is main else r for r in recs])
    if got is None:
        return
    devices, problems = got
    assert devices >= clean[0] or problems > 0, (
        f"{backend}: line {i + 1} mangled ({line!r} -> {lines[i] if i < len(lines) else '<deleted>'!r}): "
        f"{devices} of {clean[0]} devices and no problem reported"
    )
