"""``accel ray resources`` on a real local Ray cluster (``tox -e ray``); skipped without ray."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from accel.cli import main

ray: Any = pytest.importorskip("ray")

# Ray's own worker and raylet Popen handles outlive ray.shutdown() and warn when collected
# (ResourceWarning, raised through pytest's unraisable hook): not this test's resources.
pytestmark = pytest.mark.filterwarnings(
    "ignore::ResourceWarning", "ignore::pytest.PytestUnraisableExceptionWarning"
)


@pytest.fixture
def local_ray() -> Iterator[Any]:
    yield ray
    ray.shutdown()


@pytest.mark.parametrize(
    ("profile", "gpus", "resources"),
    [("ascend-910b-8", 0, {"NPU": 8}), ("mixed-nvidia-ascend", 4, {"NPU": 4}), ("mlu370-x8", 0, {"MLU": 8})],
)
def test_printed_resources_start_a_cluster_that_has_them(
    local_ray: Any, capsys: pytest.CaptureFixture[str], profile: str, gpus: int, resources: dict[str, int]
) -> None:
    assert main(["ray", "resources", "--sim", profile, "--json"]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert (printed["num_gpus"], printed["resources"]) == (gpus, resources)
    local_ray.init(num_cpus=1, num_gpus=printed["num_gpus"], resources=printed["resources"], include_dashboard=False)
    have = local_ray.cluster_resources()
    for name, count in printed["resources"].items():
        assert have[name] == count
    assert have.get("GPU", 0) == printed["num_gpus"]
