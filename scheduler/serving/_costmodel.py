"""Model shapes, physical KV-cache capacity and measured serving costs, kept as data.

The numbers live in ``data/models.json`` (shipped with the package); every entry names its
source.  Two kinds of record:

- a **model**: layers, KV heads, head dimension and dtype (so KV bytes per token is computed,
  ``layers x kv_heads x head_dim x 2 (K and V) x dtype_bytes``, and checked against the figure
  its source states), weight bytes and, where published, a replica start-up (model load) time;
- a **cost profile** for one (model, device) pair: a prefill-time table (ms by uncached prompt
  tokens) and a decode-step table (ms per step by batch size), each measured and cited.

Tables are read piecewise-linearly between their points and extrapolated linearly beyond the
last point along the last segment (prefill grows past 8K tokens, decode past batch 64).  Below
the first point the first point's time is used: a forward pass has a fixed floor, and a fully
cached prompt still runs one (the last token is always recomputed).

The only measured tables found and cited are Splitwise's Llama2-70B TP=8 ones (A100/H100); no
published end-to-end Llama-3-8B single-GPU table was found, so none is invented here.
"""

from __future__ import annotations

import bisect
import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Any

from ._errors import InvalidRequestError, UnknownModelError

__all__ = [
    "DEFAULT_BLOCK_TOKENS",
    "DEFAULT_MEMORY_UTILIZATION",
    "CostProfile",
    "CostTable",
    "ModelCatalog",
    "ModelSpec",
    "cache_blocks",
    "load_catalog",
]

#: Tokens per KV block: the Mooncake trace's ``hash_ids`` are 512-token blocks.
DEFAULT_BLOCK_TOKENS = 512
#: vLLM's default ``gpu_memory_utilization`` (the data file cites it); the rest is runtime reserve.
DEFAULT_MEMORY_UTILIZATION = 0.9


@dataclass(frozen=True)
class ModelSpec:
    """One model's shape and size.  ``kv_bytes_per_token`` is computed from the shape."""

    name: str
    layers: int
    kv_heads: int
    head_dim: int
    dtype_bytes: int
    weights_bytes: int
    #: Replica start-up (model load) time where a source publishes one, else ``None``.
    startup_seconds: float | None = None
    #: The figure the sources state (checked against the computed one by a test).
    kv_bytes_per_token_stated: int | None = None
    sources: Mapping[str, str] = field(default_factory=dict)

    @property
    def kv_bytes_per_token(self) -> int:
        """layers x kv_heads x head_dim x 2 (K and V) x dtype bytes."""
        return self.layers * self.kv_heads * self.head_dim * 2 * self.dtype_bytes


@dataclass(frozen=True)
class CostTable:
    """A measured table ``x -> milliseconds``, read piecewise-linearly (see the module doc)."""

    xs: tuple[float, ...]
    ms: tuple[float, ...]

    def __post_init__(self) -> None:
        if len(self.xs) < 2 or len(self.xs) != len(self.ms):
            raise InvalidRequestError("a cost table needs at least two (x, ms) points of equal count", field="xs")
        if any(b <= a for a, b in zip(self.xs, self.xs[1:], strict=False)):
            raise InvalidRequestError("a cost table's x values must increase strictly", field="xs")
        if any(not math.isfinite(v) or v <= 0 for v in self.ms):
            raise InvalidRequestError("a cost table's times must be positive and finite", field="ms")

    def at(self, x: float) -> float:
        """Milliseconds at ``x``: interpolated inside, the first point below, extrapolated above."""
        xs, ms = self.xs, self.ms
        if x <= xs[0]:
            return ms[0]
        i = bisect.bisect_right(xs, x)
        if i >= len(xs):
            i = len(xs) - 1  # extrapolate along the last segment
        x0, x1, y0, y1 = xs[i - 1], xs[i], ms[i - 1], ms[i]
        return y0 + (y1 - y0) * (x - x0) / (x1 - x0)


@dataclass(frozen=True)
class CostProfile:
    """Measured serving costs of one model on one device type (a replica of ``devices_per_replica``)."""

    model: ModelSpec
    device: str
    devices_per_replica: int
    device_memory_bytes: int
    prefill: CostTable
    decode: CostTable
    source: str
    units: str

    @property
    def replica_memory_bytes(self) -> int:
        """Memory of all the devices one replica spans (tensor parallelism)."""
        return self.devices_per_replica * self.device_memory_bytes

    def prefill_seconds(self, uncached_tokens: int) -> float:
        """Time to prefill ``uncached_tokens`` prompt tokens (the cached prefix is skipped)."""
        if uncached_tokens < 0:
            raise InvalidRequestError(f"uncached tokens must be >= 0, got {uncached_tokens}", field="uncached_tokens")
        return self.prefill.at(float(uncached_tokens)) / 1000.0

    def decode_step_seconds(self, batch: int) -> float:
        """Time of one decode step (one token for each of ``batch`` running requests)."""
        if batch < 1:
            raise InvalidRequestError(f"a decode batch holds at least one request, got {batch}", field="batch")
        return self.decode.at(float(batch)) / 1000.0


def cache_blocks(
    model: ModelSpec,
    device_memory_bytes: int,
    *,
    block_tokens: int = DEFAULT_BLOCK_TOKENS,
    memory_utilization: float = DEFAULT_MEMORY_UTILIZATION,
) -> int:
    """KV blocks a replica holds: what ``device_memory_bytes`` leaves after the weights.

    ``device_memory_bytes x memory_utilization`` (vLLM's default 0.9 leaves 10% to the runtime)
    minus the model's weight bytes, divided by ``kv_bytes_per_token x block_tokens``, rounded
    down.  A partition or share passes the bytes of its slice; a tensor-parallel replica the
    sum over its devices.  Llama-3-8B on an 80 GB card: 80e9 x 0.9 - 16e9 = 56e9 bytes, 427K
    tokens, 834 blocks of 512 (the issue's 977 blocks is 500K tokens: 64 GB / 128 KB with no
    runtime reserve).  Raises :class:`InvalidRequestError` when the weights do not fit.
    """
    if device_memory_bytes <= 0:
        raise InvalidRequestError(
            f"device memory must be > 0 bytes, got {device_memory_bytes}", field="device_memory_bytes"
        )
    if block_tokens <= 0:
        raise InvalidRequestError(f"block_tokens must be > 0, got {block_tokens}", field="block_tokens")
    if not 0.0 < memory_utilization <= 1.0:
        raise InvalidRequestError(
            f"memory_utilization must be in (0, 1], got {memory_utilization}", field="memory_utilization"
        )
    usable = int(device_memory_bytes * memory_utilization) - model.weights_bytes
    if usable <= 0:
        raise InvalidRequestError(
            f"{model.name} weights ({model.weights_bytes} B) do not fit in "
            f"{device_memory_bytes} B x {memory_utilization}",
            field="device_memory_bytes",
        )
    return usable // (model.kv_bytes_per_token * block_tokens)


class ModelCatalog:
    """The models and cost profiles of one data file (:func:`load_catalog`)."""

    def __init__(
        self, models: Mapping[str, ModelSpec], profiles: Sequence[CostProfile], memory_utilization: float
    ) -> None:
        self._models = dict(models)
        self._profiles = {(p.model.name, p.device): p for p in profiles}
        self.memory_utilization = memory_utilization

    @property
    def model_names(self) -> tuple[str, ...]:
        return tuple(sorted(self._models))

    @property
    def profile_keys(self) -> tuple[tuple[str, str], ...]:
        return tuple(sorted(self._profiles))

    def model(self, name: str) -> ModelSpec:
        try:
            return self._models[name]
        except KeyError:
            raise UnknownModelError(
                f"unknown model {name!r}; the cost data has {', '.join(self.model_names)}", name=name
            ) from None

    def profile(self, model: str, device: str) -> CostProfile:
        try:
            return self._profiles[(model, device)]
        except KeyError:
            have = ", ".join(f"{m}@{d}" for m, d in self.profile_keys)
            raise UnknownModelError(
                f"no cost profile for {model!r} on {device!r}; the data has {have}", name=f"{model}@{device}"
            ) from None


def _num(entry: Mapping[str, Any], key: str, where: str) -> Any:
    try:
        return entry[key]
    except KeyError:
        raise InvalidRequestError(f"{where}: missing {key!r}", field=key) from None


def _parse(doc: Mapping[str, Any]) -> ModelCatalog:
    models: dict[str, ModelSpec] = {}
    for name, m in dict(_num(doc, "models", "cost data")).items():
        where = f"model {name!r}"
        stated = m.get("kv_bytes_per_token_stated")
        startup = m.get("startup_seconds")
        spec = ModelSpec(
            name=name,
            layers=int(_num(m, "layers", where)),
            kv_heads=int(_num(m, "kv_heads", where)),
            head_dim=int(_num(m, "head_dim", where)),
            dtype_bytes=int(_num(m, "dtype_bytes", where)),
            weights_bytes=int(_num(m, "weights_bytes", where)),
            startup_seconds=None if startup is None else float(startup),
            kv_bytes_per_token_stated=None if stated is None else int(stated),
            sources=dict(m.get("sources", {})),
        )
        if min(spec.layers, spec.kv_heads, spec.head_dim, spec.dtype_bytes, spec.weights_bytes) <= 0:
            raise InvalidRequestError(f"{where}: shape and weights must be positive", field=name)
        models[name] = spec
    profiles: list[CostProfile] = []
    for p in list(_num(doc, "profiles", "cost data")):
        mname = str(_num(p, "model", "profile"))
        if mname not in models:
            raise UnknownModelError(f"cost profile names unknown model {mname!r}", name=mname)
        pre, dec = _num(p, "prefill_ms", "profile"), _num(p, "decode_step_ms", "profile")
        profiles.append(
            CostProfile(
                model=models[mname],
                device=str(_num(p, "device", "profile")),
                devices_per_replica=int(p.get("devices_per_replica", 1)),
                device_memory_bytes=int(_num(p, "device_memory_bytes", "profile")),
                prefill=CostTable(tuple(map(float, pre["tokens"])), tuple(map(float, pre["ms"]))),
                decode=CostTable(tuple(map(float, dec["batch"])), tuple(map(float, dec["ms"]))),
                source=str(_num(p, "source", "profile")),
                units=str(p.get("units", "milliseconds")),
            )
        )
    util = float(doc.get("runtime", {}).get("gpu_memory_utilization", DEFAULT_MEMORY_UTILIZATION))
    return ModelCatalog(models, profiles, util)


@lru_cache(maxsize=1)
def _packaged() -> ModelCatalog:
    text = resources.files(__package__).joinpath("data", "models.json").read_text(encoding="utf-8")
    return _parse(json.loads(text))


def load_catalog(path: str | Path | None = None) -> ModelCatalog:
    """The packaged cost data (``data/models.json``), or another file of the same schema."""
    if path is None:
        return _packaged()
    try:
        doc = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        raise InvalidRequestError(f"cannot read cost data {path}: {exc}", field="path") from exc
    return _parse(doc)
