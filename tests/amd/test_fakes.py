"""The fakes are faithful: amdsmi's hierarchy, enums and quirks, and pyrsmi's real code on them."""

from __future__ import annotations

import ctypes
import io
import logging
from contextlib import redirect_stdout

import pytest

from accel.plugins.amd.testing import STATUS, install, make_fake_amdsmi, scenario

GIB = 2**30


@pytest.fixture
def amdsmi():  # type: ignore[no-untyped-def]
    return make_fake_amdsmi(scenario("mi300x-8"))


def test_exception_hierarchy_and_codes(amdsmi) -> None:  # type: ignore[no-untyped-def]
    assert issubclass(amdsmi.AmdSmiLibraryException, amdsmi.AmdSmiException)
    assert issubclass(amdsmi.AmdSmiRetryException, amdsmi.AmdSmiLibraryException)
    assert issubclass(amdsmi.AmdSmiTimeoutException, amdsmi.AmdSmiLibraryException)
    assert issubclass(amdsmi.AmdSmiParameterException, amdsmi.AmdSmiException)
    assert not issubclass(amdsmi.AmdSmiParameterException, amdsmi.AmdSmiLibraryException)
    exc = amdsmi.AmdSmiLibraryException(-2)
    assert exc.err_code == 2 and exc.get_error_code() == 2
    assert str(exc) == "Error code:\n\t2 | AMDSMI_STATUS_NOT_SUPPORTED"
    assert amdsmi.AmdSmiRetryException().get_error_code() == 9
    assert amdsmi.AmdSmiTimeoutException().get_error_code() == 8
    assert STATUS["DRIVER_NOT_LOADED"] == 34 and STATUS["NO_PERM"] == 10 and STATUS["NOT_INIT"] == 32


def test_init_handles_and_quirks(amdsmi) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(amdsmi.AmdSmiLibraryException) as err:
        amdsmi.amdsmi_get_processor_handles()
    assert err.value.get_error_code() == 32
    amdsmi.amdsmi_init(amdsmi.AmdSmiInitFlags.INIT_AMD_GPUS)
    h1 = amdsmi.amdsmi_get_processor_handles()
    h2 = amdsmi.amdsmi_get_processor_handles()
    assert len(h1) == 8 and isinstance(h1[0], ctypes.c_void_p)
    assert h1[0] is not h2[0] and h1[0] != h2[0]  # new objects, identity equality
    asic = amdsmi.amdsmi_get_gpu_asic_info(h1[0])
    assert asic["device_id"] == "0x74a1" and asic["asic_serial"] == "0x5A3C8B2E00000000"
    assert amdsmi.amdsmi_get_gpu_device_bdf(h1[0]) == "0000:05:00.0"
    assert amdsmi.amdsmi_get_gpu_bad_page_info(h1[0]) == "No bad pages found."
    with pytest.raises(amdsmi.AmdSmiParameterException):
        amdsmi.amdsmi_get_gpu_asic_info(0x1000)  # a plain int is not a handle
    with pytest.raises(amdsmi.AmdSmiParameterException):
        amdsmi.amdsmi_get_gpu_memory_total(h1[0], 0)  # must be AmdSmiMemoryType
    assert amdsmi.amdsmi_get_gpu_memory_total(h1[0], amdsmi.AmdSmiMemoryType.VRAM) == 192 * GIB
    assert amdsmi.amdsmi_topo_get_link_type(h1[0], h1[1]) == {"hops": 1, "type": amdsmi.AmdSmiLinkType.XGMI}
    with pytest.raises(amdsmi.AmdSmiLibraryException):
        amdsmi.amdsmi_get_temp_metric(h1[0], amdsmi.AmdSmiTemperatureType.EDGE,
                                       amdsmi.AmdSmiTemperatureMetric.CURRENT)  # MI300X: no edge sensor
    reader = amdsmi.AmdSmiEventReader(h1[0], [amdsmi.AmdSmiEvtNotificationType.GPU_PRE_RESET])
    assert reader.read(1000) == []  # timeout is an empty list, never an exception
    amdsmi.amdsmi_shut_down()
    with pytest.raises(amdsmi.AmdSmiLibraryException):
        amdsmi.amdsmi_get_processor_handles()


def test_cpx_partition_power_is_na() -> None:
    amdsmi = make_fake_amdsmi(scenario("mi300x-8-cpx"))
    amdsmi.amdsmi_init()
    hs = amdsmi.amdsmi_get_processor_handles()
    assert len(hs) == 64
    assert amdsmi.amdsmi_get_power_info(hs[0])["current_socket_power"] == 160
    assert amdsmi.amdsmi_get_power_info(hs[1])["current_socket_power"] == "N/A"


def _rocml():  # type: ignore[no-untyped-def]
    from pyrsmi import rocml

    return rocml


def test_pyrsmi_package_mode_on_fake_amdsmi(caplog: pytest.LogCaptureFixture) -> None:
    with install("mi300x-8") as inst:
        rocml = _rocml()
        rocml.smi_initialize()
        try:
            assert rocml._using_amdsmi_package is True
            assert rocml.smi_get_device_count() == 8
            assert rocml.smi_get_device_name(0) == "AMD Instinct MI300X"
            assert rocml.smi_get_device_id(0) == 0x74A1
            assert rocml.smi_get_device_memory_total(0) == 192 * GIB
            # pyrsmi 1.x's "unique id" is the BDF encoding, not the ASIC id.
            assert rocml.smi_get_device_unique_id(0) == 0x05 << 8
            # Topology calls need rocm_lib, which stays None in package mode: -1.
            assert rocml.smi_get_device_link_type(0, 1) == -1
            assert rocml.smi_get_device_topo_numa_affinity(0) == -1
            assert rocml.smi_is_device_p2p_accessible(0, 1) == -1  # truthy!
            # rsmi-index calls go to rocm_lib directly: AttributeError on None.
            with pytest.raises(AttributeError):
                rocml.smi_get_device_xgmi_hive_id(0)
        finally:
            rocml.smi_shutdown()
        assert inst.amdsmi is not None and "amdsmi_init" in inst.amdsmi._fake_state.calls


def test_pyrsmi_ctypes_mode_on_fake_library() -> None:
    with install("amdsmi-absent") as inst:
        rocml = _rocml()
        rocml.smi_initialize()
        try:
            assert rocml._using_amdsmi_package is False and rocml.rocm_lib is inst.lib
            assert rocml.smi_get_device_count() == 8
            assert rocml.smi_get_device_name(7) == "AMD Instinct MI300X"
            assert rocml.smi_get_device_memory_used(0) == 283_115_520
            assert rocml.smi_get_device_pci_id(1) == 0x26 << 8
            assert rocml.smi_get_device_uuid(0, "raw") == "5a0074a1-0000-1000-80e6-8b2e00000000"
            assert rocml.smi_get_device_average_power(0) == 160.0
            # A symbol the library lacks is swallowed into -1 by pyrsmi.
            assert rocml.smi_get_device_topo_numa_affinity(0) == -1
        finally:
            rocml.smi_shutdown()
        assert inst.lib is not None and "amdsmi_get_processor_handles_by_type" in inst.lib.calls


def test_pyrsmi_ctypes_mode_without_library_fails_cleanly() -> None:
    with install("no-library"):
        rocml = _rocml()
        with pytest.raises(rocml.ROCMLError_LibraryNotFound):
            rocml.smi_initialize()


def test_pyrsmi_driver_not_live_raises_runtime_error() -> None:
    with install("driver-not-live"):
        rocml = _rocml()
        with pytest.raises(RuntimeError, match="driver not initialized"):
            rocml.smi_initialize()


def test_broken_amdsmi_prints_and_raises_keyerror() -> None:
    with install("amdsmi-broken"):
        sink = io.StringIO()
        with redirect_stdout(sink), pytest.raises(KeyError):
            import amdsmi  # noqa: F401
        assert "libamd_smi.so" in sink.getvalue()


def test_plugin_guard_swallows_the_print_and_keyerror(capsys: pytest.CaptureFixture[str]) -> None:
    from accel.plugins.amd._amdsmi import load_amdsmi

    with install("amdsmi-broken"):
        module, why = load_amdsmi()
    assert module is None and "KeyError" in why and "libamd_smi.so" in why
    assert capsys.readouterr().out == ""


def test_backend_keeps_pyrsmi_logging_off_the_root_handlers(caplog: pytest.LogCaptureFixture) -> None:
    from accel.plugin import BackendConfig
    from accel.plugins.amd import PLUGIN

    caplog.set_level(logging.DEBUG)
    with PLUGIN.open(BackendConfig(options={"scenario": "amdsmi-absent"})) as b:
        b.inventory()
    pyrsmi_records = [r for r in caplog.records if "pyrsmi" in r.pathname and r.name == "root"]
    assert pyrsmi_records == []


def test_install_restores_everything() -> None:
    import sys

    rocml = _rocml()
    before = (rocml.rocm_lib, rocml._driver_initialized, sys.modules.get("amdsmi", "missing"), list(sys.meta_path))
    for name in ("mi300x-8", "amdsmi-absent", "amdsmi-broken", "no-library"):
        with install(name):
            pass
    after = (rocml.rocm_lib, rocml._driver_initialized, sys.modules.get("amdsmi", "missing"), list(sys.meta_path))
    assert before == after
