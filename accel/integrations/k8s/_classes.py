"""DeviceClasses and example ResourceClaimTemplates for the devices :func:`resource_slices` publishes.

One ``DeviceClass`` per driver (vendor), kind and type (a whole device or a partition), named
``<kind>.<vendor>.<domain>`` and ``<kind>-partition.<vendor>.<domain>``, selecting with CEL on
``device.driver`` and the ``<domain>`` attributes ``kind`` and ``type``.  One example
``ResourceClaimTemplate`` per class, asking for one device of the inventory's first model (and,
for partitions, its first profile): a starting point to copy, not a policy.
"""

from __future__ import annotations

import json
from typing import Any

from ...model import HostInventory
from ._dra import DEFAULT_DOMAIN, _label, resource_slices

__all__ = ["claim_templates", "device_classes"]


def _groups(inv: HostInventory, domain: str, partitionable: bool) -> dict[tuple[str, str, str], dict[str, Any]]:
    """(driver, kind, type) -> the first published device of that group."""
    out: dict[tuple[str, str, str], dict[str, Any]] = {}
    for s in resource_slices(inv, domain=domain, partitionable=partitionable).slices:
        for dev in s["spec"].get("devices", []):
            attrs = dev["attributes"]
            key = (s["spec"]["driver"], attrs[f"{domain}/kind"]["string"], attrs[f"{domain}/type"]["string"])
            out.setdefault(key, dev)
    return dict(sorted(out.items()))


def _class_name(driver: str, kind: str, typ: str) -> str:
    return f"{kind}-partition.{driver}" if typ == "partition" else f"{kind}.{driver}"


def _selector(driver: str, kind: str, typ: str, domain: str) -> str:
    attrs = f"device.attributes[{json.dumps(domain)}]"
    return (f"device.driver == {json.dumps(driver)} && {attrs}.kind == {json.dumps(kind)} && "
            f"{attrs}.type == {json.dumps(typ)}")


def device_classes(
    inv: HostInventory, *, domain: str = DEFAULT_DOMAIN, partitionable: bool = False
) -> list[dict[str, Any]]:
    """``resource.k8s.io/v1`` DeviceClasses for every (vendor, kind, type) the host publishes."""
    return [
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "DeviceClass",
            "metadata": {"name": _class_name(driver, kind, typ)},
            "spec": {"selectors": [{"cel": {"expression": _selector(driver, kind, typ, domain)}}]},
        }
        for (driver, kind, typ) in _groups(inv, domain, partitionable)
    ]


def claim_templates(
    inv: HostInventory, *, domain: str = DEFAULT_DOMAIN, partitionable: bool = False
) -> list[dict[str, Any]]:
    """Example ``resource.k8s.io/v1`` ResourceClaimTemplates, one per DeviceClass, one device each."""
    out = []
    attrs = f"device.attributes[{json.dumps(domain)}]"
    for (driver, kind, typ), dev in _groups(inv, domain, partitionable).items():
        cls = _class_name(driver, kind, typ)
        model = dev["attributes"][f"{domain}/model"]["string"]
        cel = f"{attrs}.model == {json.dumps(model)}"
        profile = dev["attributes"].get(f"{domain}/partitionProfile")
        if profile is not None:
            cel += f" && {attrs}.partitionProfile == {json.dumps(profile['string'])}"
        out.append(
            {
                "apiVersion": "resource.k8s.io/v1",
                "kind": "ResourceClaimTemplate",
                "metadata": {"name": _label(f"one-{cls}", 253)},
                "spec": {
                    "spec": {
                        "devices": {
                            "requests": [
                                {
                                    "name": _label(f"one-{kind}", 63),
                                    "exactly": {
                                        "deviceClassName": cls,
                                        "allocationMode": "ExactCount",
                                        "count": 1,
                                        "selectors": [{"cel": {"expression": cel}}],
                                    },
                                }
                            ]
                        }
                    }
                },
            }
        )
    return out
