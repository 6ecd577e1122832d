"""Discovery isolates every failure into the report; sim keeps working in the same process."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from accel.discovery import EntryStatus, Stage, discover, open_session, parse_selection
from accel.errors import ConfigError, IncompatiblePluginError, PluginLoadError
from accel.plugin import BackendConfig, register
from tests.core._plugins import RELEASE, FailingOpen, GoodPlugin, HangingProbe, OldPlugin, RaisingProbe

pytestmark = pytest.mark.usefixtures("clean_registry")

SIM = {"sim": BackendConfig(options={"profile": "dgx-h100"})}


def _boom() -> object:
    raise ImportError("No module named 'libvendor'")


def test_import_probe_and_hang_failures_are_reported_and_sim_still_works() -> None:
    register("t-import", _boom)
    register("t-probe", lambda: RaisingProbe("t-probe"))
    register("t-hang", lambda: HangingProbe("t-hang"))
    fast = BackendConfig(probe_timeout_s=0.2)
    try:
        report = discover(
            {**SIM, "t-hang": fast}, backends=["sim", "t-import", "t-probe", "t-hang"], include_entry_points=True
        )
    finally:
        RELEASE.set()
    imp, probe, hang = report.entry("t-import"), report.entry("t-probe"), report.entry("t-hang")
    assert imp.status is EntryStatus.FAILED and imp.stage is Stage.LOAD
    assert "ImportError" in imp.reason and "libvendor" in imp.reason
    assert isinstance(imp.error, PluginLoadError) and isinstance(imp.error.__cause__, ImportError)
    assert probe.status is EntryStatus.FAILED and "probe exploded" in probe.reason
    assert hang.status is EntryStatus.FAILED and "timed out after 0.2 s" in hang.reason
    assert report.entry("sim").status is EntryStatus.PRESENT
    with open_session(SIM, report=report) as session:
        inv = session.inventory()
        assert len(inv.devices) == 8
        # The picture is partial: three backends whose devices (if any) are missing from it.
        assert not inv.complete
        assert {(p.kind.value, p.backend) for p in inv.problems} == {
            ("backend", "t-import"), ("backend", "t-probe"), ("backend", "t-hang")
        }
        assert any("libvendor" in p.message for p in inv.problems)
        (load,) = [p for p in inv.problems if p.backend == "t-import"]
        assert imp.error is not None and load.code == imp.error.code


def test_entry_point_whose_import_raises(fake_entry_points: Path) -> None:
    dist = fake_entry_points / "accel_fake-0.1.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: accel-fake\nVersion: 0.1\n")
    (dist / "entry_points.txt").write_text("[accel.backends]\nfakevendor = accel_fake_mod:PLUGIN\n")
    (fake_entry_points / "accel_fake_mod.py").write_text("raise RuntimeError('vendor SDK missing: libfake.so')\n")
    report = discover(SIM, backends=["sim", "fakevendor"])
    entry = report.entry("fakevendor")
    assert entry.status is EntryStatus.FAILED and entry.stage is Stage.LOAD
    assert "libfake.so" in entry.reason
    assert report.entry("sim").status is EntryStatus.PRESENT


def test_entry_point_plugin_loaded_from_metadata(fake_entry_points: Path) -> None:
    dist = fake_entry_points / "accel_fake-0.2.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: accel-fake\nVersion: 0.2\n")
    (dist / "entry_points.txt").write_text("[accel.backends]\nfakegood = accel_fake_good:PLUGIN\n")
    (fake_entry_points / "accel_fake_good.py").write_text(
        textwrap.dedent(
            """
            from tests.core._plugins import GoodPlugin
            PLUGIN = GoodPlugin("fakegood", n=3)
            """
        )
    )
    with open_session(backends=["fakegood"]) as session:
        assert len(session.inventory().devices) == 3
        assert session.report.entry("fakegood").origin == "entry-point"


def test_incompatible_api_is_rejected() -> None:
    register("old", OldPlugin)
    report = discover(backends=["old"])
    entry = report.entry("old")
    assert entry.status is EntryStatus.REJECTED
    assert isinstance(entry.error, IncompatiblePluginError)
    assert "0.9" in entry.reason and "1.0" in entry.reason
    assert "old" not in report.plugins


def test_non_plugin_object_is_rejected() -> None:
    register("weird", lambda: object())
    assert discover(backends=["weird"]).entry("weird").status is EntryStatus.REJECTED


def test_unknown_backend_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match=r"unknown backend 'nope'; known backends: .*sim"):
        discover(backends=["nope"])


@pytest.mark.parametrize(
    ("text", "allowed", "denied"),
    [
        ("nvidia,sim", {"nvidia", "sim"}, set()),
        ("-nvidia", None, {"nvidia"}),
        ("", None, set()),
        (" sim , -amd ", {"sim"}, {"amd"}),
    ],
)
def test_selection_syntax(text: str, allowed: set[str] | None, denied: set[str]) -> None:
    sel = parse_selection(text)
    assert (set(sel.allow) if sel.allow is not None else None) == allowed
    assert set(sel.deny) == denied


def test_bad_selection() -> None:
    with pytest.raises(ConfigError, match="ACCEL_BACKENDS"):
        parse_selection("nv idia")


def test_env_deny_list_keeps_plugin_unloaded(monkeypatch: pytest.MonkeyPatch) -> None:
    register("t-denied", _boom)
    monkeypatch.setenv("ACCEL_BACKENDS", "-t-denied,-nvidia")
    report = discover(SIM)
    assert report.entry("t-denied").status is EntryStatus.DISABLED
    assert report.entry("nvidia").status is EntryStatus.DISABLED


def test_env_allow_list(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ACCEL_BACKENDS", "sim")
    report = discover(SIM)
    assert [e.name for e in report.entries if e.status is not EntryStatus.DISABLED] == ["sim"]


def test_register_rejects_bad_and_duplicate_names() -> None:
    with pytest.raises(ConfigError):
        register("Bad Name", GoodPlugin)
    register("dup", GoodPlugin)
    with pytest.raises(ConfigError, match="already registered"):
        register("dup", GoodPlugin)
    register("dup", GoodPlugin, replace=True)


def test_session_merges_vendors_and_isolates_failures() -> None:
    register("acme", lambda: GoodPlugin("acme", "acme", 2))
    register("zeta", lambda: GoodPlugin("zeta", "zeta", 3))
    register("brokenread", lambda: GoodPlugin("brokenread", "broken", 1, fail_reads=True))
    register("brokenopen", lambda: FailingOpen("brokenopen"))
    with open_session(SIM, backends=["sim", "acme", "zeta", "brokenread", "brokenopen"]) as session:
        inv = session.inventory()
        vendors = sorted({d.vendor for d in inv.devices})
        assert vendors == ["acme", "nvidia", "zeta"]
        assert len(inv.devices) == 8 + 2 + 3
        read = session.report.entry("brokenread")
        assert read.status is EntryStatus.FAILED and read.stage is Stage.READ and "tiny driver failed" in read.reason
        opened = session.report.entry("brokenopen")
        assert opened.stage is Stage.OPEN and "libtiny.so" in opened.reason
        assert len(session.health()) == 14  # brokenread fails inventory only; its health answers
        some = [d.id for d in inv.devices if d.vendor == "zeta"][:1]
        assert [t.device_id for t in session.telemetry(some)] == some


def test_session_close_is_idempotent() -> None:
    session = open_session(SIM, backends=["sim"])
    session.close()
    session.close()
