"""The versioned JSON Schema of the model."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

from .inventory import SCHEMA_VERSION, HostInventory
from .telemetry import Telemetry

__all__ = ["json_schema"]


def json_schema(kind: str = "inventory") -> dict[str, Any]:
    """The JSON Schema (draft 2020-12) of ``inventory`` or ``telemetry``, with its version."""
    models: dict[str, type[BaseModel]] = {"inventory": HostInventory, "telemetry": Telemetry}
    cls = models.get(kind)
    if cls is None:
        raise KeyError(kind)
    schema: dict[str, Any] = cls.model_json_schema(mode="serialization")
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["$id"] = f"https://accel.dev/schema/{kind}/{SCHEMA_VERSION}"
    schema["x-accel-schema-version"] = SCHEMA_VERSION
    return schema
