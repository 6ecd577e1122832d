"""An operator-level iteration cost model (in the manner of Vidur), kept as data.

One engine iteration runs every layer once over all the tokens it schedules: prefill chunks and
one token for each decoding request.  Its time is

- per layer, the **linear operators** (projections, MLP, norms, rotary, residual add) at the
  iteration's total token count, read from a measured per-layer table;
- per layer, the tensor-parallel **all-reduces** (two per layer) of that many hidden vectors,
  read from a measured collective table;
- **attention**: decoding requests stream their KV cache once per step
  (``context tokens x KV bytes per token / tensor parallel / (HBM bandwidth x efficiency)``);
  a prefill chunk of ``c`` tokens after ``p`` already-computed ones costs
  ``4 x hidden x layers x c x (p + c/2) / tensor parallel`` FLOPs at a fraction of dense peak;
- a fixed per-iteration overhead (scheduling, sampling) where a deployment measures one.

The numbers live in ``data/operators.json``; each names its source (Vidur's measured H100
profile of Llama-2-70B at tensor parallel 8, the H100 datasheet) and the two attention
efficiencies are marked as assumptions.  Tables are read as :class:`CostTable` does
(piecewise-linear, flat below the first point, extrapolated along the last segment).
"""

from __future__ import annotations

import itertools
import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Any

from ._costmodel import CostTable, ModelSpec, load_catalog
from ._errors import InvalidRequestError, UnknownModelError

__all__ = ["EndToEndRun", "OperatorProfile", "ValidationPoint", "load_operator_profile"]


@dataclass(frozen=True)
class ValidationPoint:
    """A published measurement not used to build the profile: per-layer ms at ``tokens``."""

    name: str
    tokens: int
    layer_ms: float
    source: str


@dataclass(frozen=True)
class EndToEndRun:
    """A published end-to-end serving run, replayable: every request's prompt and output tokens.

    Not used to build the profile.  ``measured`` maps a metric name (``median_tpot_s``,
    ``median_ttft_s``, ``duration_s``) to the published value in seconds; ``config`` keeps what
    the source states about the deployment (served model, devices, precision, engine, token
    budget, arrival pattern).  Requests recorded with 0 output tokens produced nothing and are
    left out by :meth:`requests`.
    """

    name: str
    source: str
    prompt_tokens: tuple[int, ...]
    output_tokens: tuple[int, ...]
    measured: Mapping[str, float]
    config: Mapping[str, Any] = field(default_factory=dict)

    def requests(self) -> list[tuple[int, int]]:
        """``(prompt tokens, output tokens)`` of every request that produced output, in order."""
        return [(p, o) for p, o in zip(self.prompt_tokens, self.output_tokens, strict=True) if o > 0]


_METRICS = frozenset({"median_tpot_s", "median_ttft_s", "duration_s"})


def _run(v: Mapping[str, Any]) -> EndToEndRun:
    prompts = tuple(int(x) for x in v["prompt_tokens"])
    outputs = tuple(int(x) for x in v["output_tokens"])
    measured = {str(k): float(x) for k, x in dict(v["measured"]).items()}
    if len(prompts) != len(outputs) or not prompts or min(prompts) < 1 or min(outputs) < 0:
        raise ValueError(f"run {v.get('name')!r}: prompt and output token lists must have one entry per request")
    if not measured or not set(measured) <= _METRICS or min(measured.values()) <= 0:
        raise ValueError(f"run {v.get('name')!r}: measured metrics must be positive and among {sorted(_METRICS)}")
    skip = {"name", "source", "prompt_tokens", "output_tokens", "measured"}
    return EndToEndRun(
        str(v["name"]), str(v["source"]), prompts, outputs, measured, {k: x for k, x in v.items() if k not in skip}
    )


@dataclass(frozen=True)
class OperatorProfile:
    """Iteration time of one model on one device type at one tensor-parallel degree."""

    model: ModelSpec
    device: str
    tensor_parallel: int
    layers: int
    hidden: int
    linear_ms_per_layer: CostTable
    all_reduce_ms: CostTable
    all_reduces_per_layer: int
    hbm_bytes_per_s: float
    dense_flops_per_s: float
    attention_decode_efficiency: float
    attention_prefill_efficiency: float
    iteration_overhead_ms: float
    sources: Mapping[str, str] = field(default_factory=dict)
    validation: tuple[ValidationPoint, ...] = ()
    #: Published end-to-end runs to validate against (``end_to_end_validation`` in the data).
    end_to_end: tuple[EndToEndRun, ...] = ()

    def layer_ms(self, tokens: int) -> float:
        """Linear operators plus all-reduces of one layer over ``tokens`` tokens (ms)."""
        if tokens < 1:
            raise InvalidRequestError(f"an iteration runs >= 1 token, got {tokens}", field="tokens")
        ar = self.all_reduce_ms.at(float(tokens)) if self.tensor_parallel > 1 else 0.0
        return self.linear_ms_per_layer.at(float(tokens)) + self.all_reduces_per_layer * ar

    def iteration_seconds(
        self, prefill_chunks: Sequence[tuple[int, int]], decode_batch: int, decode_context_tokens: int
    ) -> float:
        """Time of one iteration.

        ``prefill_chunks``: ``(chunk tokens, tokens already computed before the chunk)`` for each
        request prefilling in this iteration; ``decode_batch`` requests decode one token each over
        ``decode_context_tokens`` KV tokens in total.
        """
        if decode_batch < 0 or decode_context_tokens < 0:
            raise InvalidRequestError("decode batch and context must be >= 0", field="decode_batch")
        tokens = decode_batch + sum(c for c, _ in prefill_chunks)
        if tokens < 1:
            raise InvalidRequestError("an iteration schedules at least one token", field="prefill_chunks")
        ms = self.layers * self.layer_ms(tokens) + self.iteration_overhead_ms
        kv_bytes = decode_context_tokens * self.model.kv_bytes_per_token / self.tensor_parallel
        seconds = kv_bytes / (self.hbm_bytes_per_s * self.attention_decode_efficiency)
        flops = sum(4.0 * self.hidden * self.layers * c * (p + c / 2.0) for c, p in prefill_chunks)
        seconds += flops / self.tensor_parallel / (self.dense_flops_per_s * self.attention_prefill_efficiency)
        return ms / 1000.0 + seconds

    def decode_step_seconds(self, batch: int, context_tokens: int) -> float:
        """One decode step of ``batch`` requests holding ``context_tokens`` KV tokens in total."""
        if batch < 1:
            raise InvalidRequestError(f"a decode batch holds at least one request, got {batch}", field="batch")
        return self.iteration_seconds((), batch, context_tokens)

    def prefill_seconds(self, tokens: int) -> float:
        """One whole-prompt prefill of ``tokens`` tokens with nothing cached."""
        return self.iteration_seconds(((max(1, tokens), 0),), 0, 0)


def _table(entry: Mapping[str, Any], key: str) -> CostTable:
    """A measured table read as its running maximum: more tokens never run faster, so a dip at a
    larger token count (32 -> 64 tokens in Vidur's rows) is measurement noise."""
    try:
        t = entry[key]
        ms = list(itertools.accumulate(map(float, t["ms"]), max))
        return CostTable(tuple(map(float, t["tokens"])), tuple(ms))
    except (KeyError, TypeError, ValueError) as exc:
        raise InvalidRequestError(f"operator profile: bad table {key!r} ({exc!r})", field=key) from exc


def _parse(doc: Mapping[str, Any]) -> list[OperatorProfile]:
    catalog = load_catalog()
    out: list[OperatorProfile] = []
    for p in list(doc.get("profiles", [])):
        try:
            prof = OperatorProfile(
                model=catalog.model(str(p["model"])),
                device=str(p["device"]),
                tensor_parallel=int(p["tensor_parallel"]),
                layers=int(p["layers"]),
                hidden=int(p["hidden"]),
                linear_ms_per_layer=_table(p, "linear_ms_per_layer"),
                all_reduce_ms=_table(p, "all_reduce_ms"),
                all_reduces_per_layer=int(p["all_reduces_per_layer"]),
                hbm_bytes_per_s=float(p["hbm_bytes_per_s"]),
                dense_flops_per_s=float(p["dense_flops_per_s"]),
                attention_decode_efficiency=float(p["attention_decode_efficiency"]),
                attention_prefill_efficiency=float(p["attention_prefill_efficiency"]),
                iteration_overhead_ms=float(p["iteration_overhead_ms"]),
                sources=dict(p.get("sources", {})),
                validation=tuple(
                    ValidationPoint(str(v["name"]), int(v["tokens"]), float(v["layer_ms"]), str(v["source"]))
                    for v in p.get("validation", [])
                ),
                end_to_end=tuple(_run(v) for v in p.get("end_to_end_validation", [])),
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise InvalidRequestError(f"operator profile: malformed entry ({exc!r})", field="profiles") from exc
        nums = (prof.tensor_parallel, prof.layers, prof.hidden, prof.hbm_bytes_per_s, prof.dense_flops_per_s)
        effs = (prof.attention_decode_efficiency, prof.attention_prefill_efficiency)
        if min(nums) <= 0 or not all(0 < e <= 1 for e in effs) or not math.isfinite(prof.iteration_overhead_ms):
            raise InvalidRequestError(
                f"operator profile {prof.model.name}@{prof.device}: sizes, rates and efficiencies must be positive "
                "(efficiencies at most 1)",
                field="profiles",
            )
        out.append(prof)
    return out


@lru_cache(maxsize=1)
def _packaged() -> tuple[OperatorProfile, ...]:
    text = resources.files(__package__).joinpath("data", "operators.json").read_text(encoding="utf-8")
    return tuple(_parse(json.loads(text)))


def load_operator_profile(model: str, device: str, *, path: str | Path | None = None) -> OperatorProfile:
    """The operator profile of ``model`` on ``device`` from ``data/operators.json`` (or ``path``)."""
    if path is None:
        profiles: Sequence[OperatorProfile] = _packaged()
    else:
        try:
            profiles = _parse(json.loads(Path(path).read_text(encoding="utf-8")))
        except (OSError, json.JSONDecodeError) as exc:
            raise InvalidRequestError(f"cannot read operator profiles {path}: {exc}", field="path") from exc
    for p in profiles:
        if p.model.name == model and p.device == device:
            return p
    have = ", ".join(f"{p.model.name}@{p.device}" for p in profiles) or "none"
    raise UnknownModelError(f"no operator profile for {model!r} on {device!r}; the data has {have}", name=model)
