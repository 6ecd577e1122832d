"""Shared base for every model: frozen, strict about unknown fields, JSON-ready."""

from __future__ import annotations

import re
from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field

__all__ = [
    "QUALIFIED_NAME",
    "Bytes",
    "Celsius",
    "Hertz",
    "Joules",
    "Model",
    "NonNegInt",
    "Ratio",
    "Seconds",
    "VendorExtras",
    "Watts",
]


class Model(BaseModel):
    """Base of all accel models: immutable, no unknown keys, validated on assignment of defaults."""

    model_config = ConfigDict(
        frozen=True,
        extra="forbid",
        validate_default=True,
        ser_json_inf_nan="constants",
        use_enum_values=False,
    )


# Units are in field names; these aliases carry the range rule of each unit.
Bytes = Annotated[int, Field(ge=0, description="bytes (SI base unit)")]
NonNegInt = Annotated[int, Field(ge=0)]
Watts = Annotated[float, Field(ge=0, description="watts")]
Joules = Annotated[float, Field(ge=0, description="joules")]
Hertz = Annotated[float, Field(ge=0, description="hertz")]
Seconds = Annotated[float, Field(ge=0, description="seconds")]
Celsius = Annotated[float, Field(ge=-273.15, le=1000, description="degrees Celsius")]
Ratio = Annotated[float, Field(ge=0.0, le=1.0, description="ratio in 0..1")]

#: ``<domain>/<name>``, the DRA qualified-name grammar used for vendor extras.
QUALIFIED_NAME = re.compile(r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?/[A-Za-z_][A-Za-z0-9_.-]{0,63}$")

VendorExtras = dict[str, str | int | float | bool]
