"""How example-smi's own states read: a lost board and a board whose health it cannot tell."""

from accel_backend_example import PLUGIN

from accel.model import HealthState
from accel.plugin import BackendConfig


def _first(scenario: str):  # type: ignore[no-untyped-def]
    backend = PLUGIN.open(BackendConfig(options={"scenario": scenario}))
    try:
        return backend.inventory().devices[0]
    finally:
        backend.close()


def test_lost_board_is_unhealthy_with_the_tool_code() -> None:
    dev = _first("two-gpu-lost")
    assert dev.health.state is HealthState.UNHEALTHY
    assert [c.vendor_code for c in dev.health.conditions] == ["example.xid:79"]


def test_health_not_supported_is_unknown_not_healthy() -> None:
    assert _first("two-gpu-nohealth").health.state is HealthState.UNKNOWN


def test_binding_by_uuid() -> None:
    dev = _first("two-gpu")
    assert (dev.binding.visible_env, dev.binding.visible_id) == ("EXAMPLE_VISIBLE_DEVICES", dev.uuid)
