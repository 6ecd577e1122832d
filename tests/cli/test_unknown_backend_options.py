"""Every backend refuses an ``--option`` it does not read, as the simulator does (issue 32).

``accel ls --backend ascend -o scenario=310-4 -o bogus=1`` used to list the scenario and exit
0: a misspelt option was silently ignored.  Now every backend shipped with accel names the
unknown option(s) and the ones it knows (:func:`accel.plugin.check_options`), and ``accel``
exits 2 with that one line.
"""

from __future__ import annotations

from importlib.metadata import entry_points

import pytest

from accel.cli import EXIT_OK, EXIT_USAGE, main
from accel.errors import ConfigError
from accel.plugin import ENTRY_POINT_GROUP, BackendConfig, check_options

#: One shipped scenario of each of the ten vendor backends, and the options each reads.
BACKENDS = {
    "nvidia": ("a100-mig", ["proc_root", "scenario"]),
    "amd": ("mi300x-8", ["scenario"]),
    "ascend": ("310-4", ["board", "read", "scenario", "vnpu"]),
    "cambricon": ("mlu370-x4", ["read", "scenario"]),
    "enflame": ("s60g-sriov", ["read", "scenario", "sriov"]),
    "hygon": ("k100-8dcu", ["read", "scenario"]),
    "iluvatar": ("bi-v150-16", ["read", "scenario"]),
    "kunlunxin": ("p800-8", ["read", "scenario"]),
    "metax": ("c550-8", ["read", "scenario"]),
    "mthreads": ("s5000-8", ["read", "scenario"]),
}


@pytest.mark.parametrize("backend", sorted(BACKENDS))
def test_every_backend_refuses_an_unknown_option(backend: str, capsys: pytest.CaptureFixture[str]) -> None:
    scenario, known = BACKENDS[backend]
    assert main(["ls", "--backend", backend, "-o", f"scenario={scenario}"]) == EXIT_OK
    capsys.readouterr()
    code = main(["ls", "--backend", backend, "-o", f"scenario={scenario}", "-o", "bogus=1", "-o", "zzz=2"])
    out, err = capsys.readouterr()
    assert code == EXIT_USAGE and out == ""
    assert err.splitlines() == [f"accel: error: {backend}: unknown option(s) bogus, zzz; known: {', '.join(known)}"]


@pytest.mark.parametrize("backend", sorted(BACKENDS))
def test_the_plugin_refuses_it_on_open(backend: str) -> None:
    scenario, _ = BACKENDS[backend]
    (entry,) = entry_points(group=ENTRY_POINT_GROUP, name=backend)
    plugin = entry.load()
    with pytest.raises(ConfigError, match=rf"^{backend}: unknown option\(s\) senario;"):
        plugin.open(BackendConfig(options={"scenario": scenario, "senario": scenario}))


def test_the_simulator_says_it_the_same_way(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["ls", "--sim", "dgx-h100", "-o", "bogus=1"]) == EXIT_USAGE
    assert capsys.readouterr().err.splitlines() == [
        "accel: error: sim: unknown option(s) bogus; known: clock, faults, load, profile, seed, state, tick_on_read"]


def test_check_options_accepts_the_known_ones() -> None:
    check_options("x", BackendConfig(options={"a": 1}), ("a", "b"))
    with pytest.raises(ConfigError, match=r"^x: unknown option\(s\) c; known: none$"):
        check_options("x", BackendConfig(options={"c": 1}), ())
