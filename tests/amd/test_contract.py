"""Contract checks: no sentinel ever reaches the model, no vendor exception escapes, light import."""

from __future__ import annotations

import subprocess
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

import pydantic
import pytest

from accel.errors import AccelError
from accel.plugin import BackendConfig
from accel.plugins.amd import PLUGIN
from accel.plugins.amd.testing import SCENARIOS, install, scenario

OPENABLE = [n for n, h in SCENARIOS.items() if h.driver_live]


def _walk(obj: Any, path: str) -> list[tuple[str, Any]]:
    """Every leaf value of a model tree, with its path."""
    out: list[tuple[str, Any]] = []
    if isinstance(obj, pydantic.BaseModel):
        for name in type(obj).model_fields:
            out += _walk(getattr(obj, name), f"{path}.{name}")
    elif isinstance(obj, dict):
        for k, v in obj.items():
            out += _walk(k, f"{path}[key]")
            out += _walk(v, f"{path}[{k!r}]")
    elif isinstance(obj, list | tuple | set | frozenset):
        for i, v in enumerate(obj):
            out += _walk(v, f"{path}[{i}]")
    else:
        out.append((path, obj))
    return out


def _sentinels(obj: Any, path: str) -> list[str]:
    bad = []
    for where, value in _walk(obj, path):
        if isinstance(value, bool):
            continue
        if isinstance(value, int | float) and value in (-1, 0xFFFF, 0xFFFFFFFF, 0xFFFFFFFFFFFFFFFF):
            bad.append(f"{where} = {value!r}")
        if isinstance(value, str) and value.strip().upper() in ("N/A", "NA", "-1", ""):
            bad.append(f"{where} = {value!r}")
    return bad


@pytest.mark.parametrize("name", OPENABLE)
def test_no_sentinel_in_any_field_of_any_model(name: str) -> None:
    with PLUGIN.open(BackendConfig(options={"scenario": name})) as b:
        models: list[tuple[str, Any]] = [("inventory", b.inventory())]
        models += [(f"telemetry[{i}]", t) for i, t in enumerate(b.telemetry())]
        models += [(f"health[{k}]", h) for k, h in b.health().items()]
        models += [(f"partition[{i}]", p) for i, p in enumerate(b.partitions())]  # type: ignore[attr-defined]
        models += [(f"process[{i}]", p) for i, p in enumerate(b.processes())]  # type: ignore[attr-defined]
    found = [s for label, m in models for s in _sentinels(m, label)]
    assert found == []
    assert len(_walk(models[0][1], "inventory")) > 100  # the scan really walked the tree


class _Boom(Exception):
    pass


def _poisoned(name: str, failing: dict[str, BaseException]) -> Any:
    """The fake amdsmi of ``name`` with some functions replaced by ones that raise."""
    inst = install(scenario(name), build_sysfs=True)
    mod = inst.amdsmi
    assert mod is not None
    for fn, exc in failing.items():
        original = getattr(mod, fn)

        def raiser(*args: Any, _exc: BaseException = exc, _orig: Any = original, _fn: str = fn) -> Any:
            handle = args[0] if args else None
            # Only the third handle fails, so the others must still be reported.
            if getattr(handle, "value", None) == 0x1002 or _fn == "amdsmi_get_processor_handles":
                raise _exc
            return _orig(*args)

        setattr(mod, fn, raiser)
    return inst


@pytest.mark.parametrize(
    ("fn", "kind"),
    [
        ("amdsmi_get_gpu_total_ecc_count", "library"),
        ("amdsmi_get_gpu_asic_info", "python"),
        ("amdsmi_get_gpu_device_bdf", "library"),
        ("amdsmi_get_gpu_device_bdf", "python"),
        ("amdsmi_get_power_cap_info", "parameter"),
        ("amdsmi_get_xgmi_info", "python"),
        ("amdsmi_get_gpu_process_list", "library"),
        ("amdsmi_get_temp_metric", "parameter"),
        ("amdsmi_get_gpu_memory_total", "python"),
    ],
)
def test_no_vendor_exception_escapes_and_one_bad_device_hides_nothing(fn: str, kind: str) -> None:
    from accel.plugins.amd._backend import AmdBackend

    probe = install(scenario("mi300x-8"))
    fake = probe.amdsmi
    probe.restore()
    assert fake is not None
    exc: BaseException = {
        "library": fake.AmdSmiLibraryException(7),
        "parameter": fake.AmdSmiParameterException(1, int),
        "python": _Boom("binding bug"),
    }[kind]
    inst = _poisoned("mi300x-8", {fn: exc})
    try:
        with AmdBackend(BackendConfig(sysfs_root=inst.sysfs_root)) as b:
            inv = b.inventory()
            b.telemetry()
            b.health()
    finally:
        inst.cleanup()
    assert len(inv.devices) == 8  # sysfs and pyrsmi still cover the device amdsmi failed on
    assert len({d.id for d in inv.devices}) == 8


def test_handles_enumeration_failure_falls_back() -> None:
    from accel.plugins.amd._backend import AmdBackend

    inst = install(scenario("mi300x-8"), build_sysfs=True)
    assert inst.amdsmi is not None
    lib_exc = inst.amdsmi.AmdSmiLibraryException
    original = inst.amdsmi.amdsmi_get_processor_handles
    calls = {"n": 0}

    def flaky() -> Any:
        calls["n"] += 1
        if calls["n"] > 1:  # pyrsmi's own enumeration works, ours fails afterwards
            raise lib_exc(STATUS_BUSY)
        return original()

    STATUS_BUSY = 30
    inst.amdsmi.amdsmi_get_processor_handles = flaky
    try:
        with AmdBackend(BackendConfig(sysfs_root=inst.sysfs_root)) as b:
            inv = b.inventory()
    finally:
        inst.cleanup()
    assert len(inv.devices) == 8


def test_error_mapping_by_code() -> None:
    from accel.errors import DeviceLostError, DriverError, NotSupportedError, PermissionDeniedError
    from accel.plugins.amd._amdsmi import map_amdsmi_error

    fake = install(scenario("mi300x-8"))
    mod = fake.amdsmi
    fake.restore()
    assert mod is not None
    lib = mod.AmdSmiLibraryException
    assert isinstance(map_amdsmi_error(mod, lib(2), "x"), NotSupportedError)
    assert isinstance(map_amdsmi_error(mod, lib(40), "x"), NotSupportedError)
    assert isinstance(map_amdsmi_error(mod, lib(10), "x"), PermissionDeniedError)
    assert isinstance(map_amdsmi_error(mod, lib(31), "x"), DeviceLostError)
    drv = map_amdsmi_error(mod, lib(34), "x")
    assert isinstance(drv, DriverError) and drv.code == "driver.not-loaded" and drv.vendor_code == "amd.smi:34"
    assert isinstance(map_amdsmi_error(mod, mod.AmdSmiRetryException(), "x"), DriverError)
    assert isinstance(map_amdsmi_error(mod, ValueError("?"), "x"), AccelError)


def test_import_is_light_and_silent() -> None:
    code = (
        "import sys, accel.plugins.amd as m; "
        "assert 'pyrsmi' not in sys.modules and 'amdsmi' not in sys.modules, sorted(sys.modules); "
        "assert 'accel.plugins.amd.testing' not in sys.modules; print(m.PLUGIN.info.name, end='')"
    )
    out = subprocess.run([sys.executable, "-W", "error", "-c", code], capture_output=True, text=True, check=False)
    assert out.returncode == 0, out.stderr
    assert out.stdout == "amd" and out.stderr == ""


def test_probe_real_mode_on_fake_sysfs(tmp_path: Path) -> None:
    from accel.plugin import ProbeStatus
    from accel.plugins.amd.testing import build_amdgpu_sysfs
    from accel.testing import FakeSysfs

    empty = tmp_path / "empty"
    FakeSysfs(empty)
    assert PLUGIN.probe(BackendConfig(sysfs_root=empty)).status is ProbeStatus.ABSENT
    live = tmp_path / "live"
    build_amdgpu_sysfs(scenario("mi300x-8"), live)
    res = PLUGIN.probe(BackendConfig(sysfs_root=live))
    assert res.status is ProbeStatus.PRESENT and res.device_count == 8
    dead = tmp_path / "dead"
    build_amdgpu_sysfs(replace(scenario("mi300x-8"), driver_live=False), dead)
    res = PLUGIN.probe(BackendConfig(sysfs_root=dead))
    assert res.status is ProbeStatus.ERROR and "not live" in res.reason
    assert PLUGIN.probe(BackendConfig(options={"scenario": "nope"})).status is ProbeStatus.ERROR
    assert PLUGIN.probe(BackendConfig(sysfs_root=tmp_path / "missing")).status is ProbeStatus.ABSENT


def test_sysfs_oracle_agrees_with_the_inventory() -> None:
    from accel.plugins.amd.layers import read_cards

    with PLUGIN.open(BackendConfig(options={"scenario": "mi300x-8"})) as b:
        inv = b.inventory()
        cards = read_cards(b._root)  # type: ignore[attr-defined]
    assert [c.bus_id for c in cards] == [d.pci.bus_id for d in inv.devices if d.pci]
    for card, dev in zip(cards, inv.devices, strict=True):
        assert card.memory_total_bytes == dev.memory_total_bytes
        assert f"amd:{card.unique_id}" == dev.id
        assert card.xgmi_hive_id == dev.extras["amd.com/xgmiHiveId"]
