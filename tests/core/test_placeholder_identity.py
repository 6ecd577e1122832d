"""Placeholder identities never become stable ids (issue 13, finding 3); see docs/identity.md."""

from __future__ import annotations

import pytest

from accel.model import device_id_for, is_placeholder_identity

BUS = "0000:c1:00.0"


@pytest.mark.parametrize(
    ("vendor", "value"),
    [
        ("hygon", "a000000000000000"),  # Z100L rocm-smi --json "Unique ID" (firmware default)
        ("hygon", "0xa000000000000000"),
        ("hygon", "0xA000000000000000"),
        ("hygon", 0xA000000000000000),
        ("amd", "0x0000000000000000"),
        ("amd", "0xFFFFFFFFFFFFFFFF"),
        ("amd", 0),
        ("amd", 0xFFFFFFFFFFFFFFFF),
        ("nvidia", "GPU-00000000-0000-0000-0000-000000000000"),
        ("nvidia", "GPU-ffffffff-ffff-ffff-ffff-ffffffffffff"),
        ("amd", "N/A"),  # rocm-smi 6.2.4 RX 7800 XT "Serial Number": "N/A"
        ("hygon", "TPXxxxx"),  # K100-AI serial masked by the sample's author
        ("hygon", "CPU-XX"),  # rocminfo's masked CPU agent Uuid
        ("amd", "xxxx"),
        ("amd", "****"),
        ("amd", ""),
        ("amd", "   "),
        ("amd", None),
        ("enflame", "sn-N/A"),
        ("amd", "Not Supported"),
        ("amd", "unknown"),
        ("hygon", "hygon:0xa000000000000000"),
    ],
)
def test_placeholders(vendor: str, value: object) -> None:
    assert is_placeholder_identity(vendor, value)


@pytest.mark.parametrize(
    ("vendor", "value"),
    [
        ("hygon", "7100fa8866904061"),  # K100-AI real unique id
        ("hygon", "0x7100fa8866904061"),
        ("amd", "0x5c88007d760374f3"),  # RX 7800 XT real unique id
        ("amd", "a000000000000000"),  # a Hygon firmware default only: no AMD sample shows it
        ("nvidia", "GPU-5ebdeb63-ba7a-5904-4f16-495b3e1de6c8"),
        ("ascend", "TR6Y46010302"),
        ("enflame", "sn-A0A1650510676"),
        ("amd", 1),
    ],
)
def test_real_identities(vendor: str, value: object) -> None:
    assert not is_placeholder_identity(vendor, value)


def test_device_id_falls_back_to_pci_for_a_placeholder() -> None:
    assert device_id_for("hygon", uuid="0xa000000000000000", bus_id=BUS) == f"hygon:pci-{BUS}"
    assert device_id_for("amd", uuid="N/A", bus_id=BUS) == f"amd:pci-{BUS}"
    assert device_id_for("hygon", uuid="0x7100fa8866904061", bus_id=BUS) == "hygon:0x7100fa8866904061"


def test_two_cards_with_the_firmware_default_get_distinct_ids() -> None:
    ids = {device_id_for("hygon", uuid="0xa000000000000000", bus_id=b) for b in ("0000:01:00.0", "0000:02:00.0")}
    assert len(ids) == 2


def test_placeholder_without_bus_id_is_an_error_not_a_shared_id() -> None:
    with pytest.raises(ValueError, match="placeholder"):
        device_id_for("hygon", uuid="0xa000000000000000")
    with pytest.raises(ValueError):
        device_id_for("hygon")
