"""``accel ray resources``: Ray's conventions from each device's binding."""

from __future__ import annotations

import json

import pytest

from accel.cli import main
from accel.discovery import open_session
from accel.integrations.frameworks import ray_resources
from accel.plugin import BackendConfig


def _json(capsys: pytest.CaptureFixture[str], *argv: str) -> dict[str, object]:
    assert main(["ray", "resources", *argv, "--json"]) == 0
    out: dict[str, object] = json.loads(capsys.readouterr().out)
    return out


def test_ascend_is_npu_in_resources(capsys: pytest.CaptureFixture[str]) -> None:
    out = _json(capsys, "--sim", "ascend-910b-8")
    assert (out["num_gpus"], out["resources"]) == (0, {"NPU": 8})
    assert out["env"] == {"NPU": "ASCEND_RT_VISIBLE_DEVICES"}
    assert out["command"] == "ray start --resources='{\"NPU\": 8}'"


def test_nvidia_goes_to_num_gpus_beside_npus(capsys: pytest.CaptureFixture[str]) -> None:
    out = _json(capsys, "--sim", "mixed-nvidia-ascend")
    assert (out["num_gpus"], out["resources"]) == (4, {"NPU": 4})
    assert out["command"] == "ray start --num-gpus=4 --resources='{\"NPU\": 4}'"


def test_human_form_prints_both_flags(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["ray", "resources", "--sim", "mixed-nvidia-ascend"]) == 0
    text = capsys.readouterr().out
    assert "--num-gpus=4" in text and "--resources='{\"NPU\": 4}'" in text
    assert "ASCEND_RT_VISIBLE_DEVICES" in text and "CUDA_VISIBLE_DEVICES" in text


def test_cambricon_replay_is_mlu(capsys: pytest.CaptureFixture[str]) -> None:
    out = _json(capsys, "--backend", "cambricon", "--option", "scenario=mlu370-x8")
    assert out["num_gpus"] == 0 and set(out["resources"]) == {"MLU"}  # type: ignore[arg-type]


def test_a_vendor_nothing_names_gets_a_custom_resource_and_a_note() -> None:
    with open_session({"iluvatar": BackendConfig(options={"scenario": "bi-v150-16"})}, backends=["iluvatar"]) as s:
        res = ray_resources(s.inventory())
    assert res.num_gpus == 0 and res.resources == {"ILUVATAR_GPU": 16}
    assert res.env == {"ILUVATAR_GPU": "CUDA_VISIBLE_DEVICES"}
    assert any("custom" in n for n in res.notes)
