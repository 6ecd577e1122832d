"""Placement requests: what a workload asks the scheduler for.

A :class:`Request` is a frozen value.  It asks for host CPU (milli-CPU) and host memory, plus at
most one kind of accelerator allocation:

* ``devices=n`` whole devices (exclusive), or
* ``share=Share(compute_milli, memory_bytes)`` one fractional share of a single device, or
* ``partition=profile`` one hardware partition (MIG, CPX, vNPU...) by profile name.

``selector`` restricts which devices qualify (vendor, model, architecture, minimum memory and a
CEL-like ``expr``); ``topology`` constrains where a multi-device request (or a gang) may land;
``gang`` names an all-or-nothing group.  ``priority`` and ``tenant`` are carried for queueing and
quota layers.  Invalid combinations raise :class:`InvalidRequestError` at construction.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from ._errors import InvalidRequestError

__all__ = [
    "MILLI",
    "DeviceSelector",
    "Request",
    "Share",
    "TopologyConstraint",
    "TopologyLevel",
]

MILLI = 1000
"""Compute of one whole device, in milli-device units."""


@dataclass(frozen=True, slots=True)
class Share:
    """A fractional share of one device: ``compute_milli`` of 1000 and ``memory_bytes`` of memory."""

    compute_milli: int
    memory_bytes: int = 0

    def __post_init__(self) -> None:
        if not 0 < self.compute_milli < MILLI:
            raise InvalidRequestError(
                f"share.compute_milli must be in 1..999, got {self.compute_milli} "
                "(ask for devices=1 for a whole device)", field="share.compute_milli")
        if self.memory_bytes < 0:
            raise InvalidRequestError("share.memory_bytes must be >= 0", field="share.memory_bytes")


class TopologyLevel(StrEnum):
    """How tightly a multi-device request must be kept together (tightest first)."""

    LINK_DOMAIN = "link_domain"  # one NVLink/NVSwitch/xGMI/HCCS domain
    PCIE_SWITCH = "pcie_switch"
    NUMA = "numa"
    HOST = "host"
    RACK = "rack"
    SWITCH_GROUP = "switch_group"
    ANY = "any"


_LEVEL_ORDER = list(TopologyLevel)


@dataclass(frozen=True, slots=True)
class TopologyConstraint:
    """Keep the devices of a request (or gang) within ``level``.

    ``required=True`` makes it a filter (no placement rather than a looser one); otherwise it is a
    preference the topology scorer maximises, with reservation so that it does not decay into
    scattering (see :class:`accel.scheduler.GangPlacer`).
    """

    level: TopologyLevel = TopologyLevel.HOST
    required: bool = False

    def rank(self) -> int:
        """Position of ``level`` from tightest (0) to loosest."""
        return _LEVEL_ORDER.index(self.level)


_EXPR_SUBS = ((re.compile(r"&&"), " and "), (re.compile(r"\|\|"), " or "),
              (re.compile(r"!(?!=)"), " not "), (re.compile(r"\btrue\b"), "True"),
              (re.compile(r"\bfalse\b"), "False"))
_ALLOWED_NODES = (ast.Expression, ast.BoolOp, ast.And, ast.Or, ast.UnaryOp, ast.Not, ast.Compare,
                  ast.Eq, ast.NotEq, ast.Lt, ast.LtE, ast.Gt, ast.GtE, ast.In, ast.NotIn, ast.Name,
                  ast.Load, ast.Constant, ast.Attribute, ast.Tuple, ast.List, ast.BinOp, ast.Mult,
                  ast.Add, ast.Sub, ast.USub)


def _compile_expr(expr: str) -> ast.Expression:
    text = expr
    for pattern, repl in _EXPR_SUBS:
        text = pattern.sub(repl, text)
    try:
        tree = ast.parse(text.strip(), mode="eval")
    except SyntaxError as exc:
        raise InvalidRequestError(f"selector.expr is not a valid expression: {expr!r}",
                                  field="selector.expr") from exc
    for node in ast.walk(tree):
        if not isinstance(node, _ALLOWED_NODES):
            raise InvalidRequestError(
                f"selector.expr uses {type(node).__name__}, which is not allowed: {expr!r}",
                field="selector.expr")
    return tree


def _eval(node: ast.AST, env: Mapping[str, Any]) -> Any:
    if isinstance(node, ast.Expression):
        return _eval(node.body, env)
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, ast.Name):
        return env.get(node.id)
    if isinstance(node, ast.Attribute):
        base = _eval(node.value, env)
        if isinstance(base, Mapping):
            return base.get(node.attr)
        return None
    if isinstance(node, ast.Tuple | ast.List):
        return [_eval(e, env) for e in node.elts]
    if isinstance(node, ast.UnaryOp):
        val = _eval(node.operand, env)
        return (not val) if isinstance(node.op, ast.Not) else -val
    if isinstance(node, ast.BinOp):
        left, right = _eval(node.left, env), _eval(node.right, env)
        if left is None or right is None:
            return None
        if isinstance(node.op, ast.Mult):
            return left * right
        return left + right if isinstance(node.op, ast.Add) else left - right
    if isinstance(node, ast.BoolOp):
        vals = (_eval(v, env) for v in node.values)
        return all(vals) if isinstance(node.op, ast.And) else any(vals)
    if isinstance(node, ast.Compare):
        left = _eval(node.left, env)
        for op, comp in zip(node.ops, node.comparators, strict=True):
            right = _eval(comp, env)
            try:
                ok = _compare(op, left, right)
            except TypeError:
                return False
            if not ok:
                return False
            left = right
        return True
    raise InvalidRequestError(f"unsupported expression node {type(node).__name__}")


def _compare(op: ast.cmpop, left: Any, right: Any) -> bool:
    if isinstance(op, ast.In | ast.NotIn):
        inside = right is not None and left in right
        return inside if isinstance(op, ast.In) else not inside
    if left is None or right is None:
        return isinstance(op, ast.NotEq) and left is not right
    if isinstance(op, ast.Eq):
        return bool(left == right)
    if isinstance(op, ast.NotEq):
        return bool(left != right)
    if isinstance(op, ast.Lt):
        return bool(left < right)
    if isinstance(op, ast.LtE):
        return bool(left <= right)
    if isinstance(op, ast.Gt):
        return bool(left > right)
    return bool(left >= right)


@dataclass(frozen=True, slots=True)
class DeviceSelector:
    """Which devices qualify.  Empty fields match everything.

    ``expr`` is a CEL-like predicate over the device's attributes (``vendor``, ``kind``,
    ``model``, ``architecture``, ``memory_bytes``, ``compute_capability``, ``capabilities``
    (a set of names), ``attributes`` (vendor extras)), e.g.
    ``memory_bytes >= 40 * 1000000000 && "fp8" in capabilities``.  No vendor special cases: it sees
    the same fields for every vendor.
    """

    vendors: tuple[str, ...] = ()
    models: tuple[str, ...] = ()
    architectures: tuple[str, ...] = ()
    kinds: tuple[str, ...] = ()
    min_memory_bytes: int = 0
    expr: str | None = None
    _compiled: ast.Expression | None = field(default=None, compare=False, hash=False, repr=False)

    def __post_init__(self) -> None:
        if self.min_memory_bytes < 0:
            raise InvalidRequestError("selector.min_memory_bytes must be >= 0",
                                      field="selector.min_memory_bytes")
        for name in ("vendors", "models", "architectures", "kinds"):
            value = getattr(self, name)
            if isinstance(value, str):
                raise InvalidRequestError(f"selector.{name} must be a tuple of strings, not a string",
                                          field=f"selector.{name}")
        if self.expr is not None:
            object.__setattr__(self, "_compiled", _compile_expr(self.expr))

    @property
    def is_empty(self) -> bool:
        """True when the selector matches every device."""
        return not (self.vendors or self.models or self.architectures or self.kinds
                    or self.min_memory_bytes or self.expr)

    def matches(self, attrs: Mapping[str, Any]) -> bool:
        """Whether a device described by ``attrs`` qualifies."""
        if self.vendors and attrs.get("vendor") not in self.vendors:
            return False
        if self.models and attrs.get("model") not in self.models:
            return False
        if self.architectures and attrs.get("architecture") not in self.architectures:
            return False
        if self.kinds and attrs.get("kind") not in self.kinds:
            return False
        if self.min_memory_bytes and int(attrs.get("memory_bytes") or 0) < self.min_memory_bytes:
            return False
        return self._compiled is None or bool(_eval(self._compiled, attrs))


@dataclass(frozen=True, slots=True)
class Request:
    """One placement request (a pod, a task, or one member of a gang).

    Host resources: ``cpu_milli`` (1000 = one CPU) and ``memory_bytes``.  Accelerators: exactly
    one of ``devices`` (whole devices), ``share`` (a fraction of one device) or ``partition`` (a
    partition profile name), or none for a CPU-only request.
    """

    name: str
    cpu_milli: int = 0
    memory_bytes: int = 0
    devices: int = 0
    share: Share | None = None
    partition: str | None = None
    selector: DeviceSelector = field(default_factory=DeviceSelector)
    topology: TopologyConstraint | None = None
    gang: str | None = None
    priority: int = 0
    tenant: str | None = None

    def __post_init__(self) -> None:
        if not self.name:
            raise InvalidRequestError("request.name must be non-empty", field="name")
        for fname in ("cpu_milli", "memory_bytes", "devices"):
            value = getattr(self, fname)
            if not isinstance(value, int) or isinstance(value, bool):
                raise InvalidRequestError(f"request.{fname} must be an int, got {value!r}", field=fname)
            if value < 0:
                raise InvalidRequestError(f"request.{fname} must be >= 0, got {value}", field=fname)
        kinds = sum((self.devices > 0, self.share is not None, self.partition is not None))
        if kinds > 1:
            raise InvalidRequestError(
                "request asks for more than one of devices / share / partition; pick one",
                field="devices")
        if self.partition is not None and not self.partition:
            raise InvalidRequestError("request.partition must be a non-empty profile name",
                                      field="partition")
        if self.topology is not None and not isinstance(self.topology, TopologyConstraint):
            raise InvalidRequestError("request.topology must be a TopologyConstraint", field="topology")

    # -- derived -------------------------------------------------------------------------------
    @property
    def wants_devices(self) -> bool:
        """True when the request needs any accelerator."""
        return self.devices > 0 or self.share is not None or self.partition is not None

    @property
    def device_count(self) -> int:
        """Number of devices touched (1 for a share or partition)."""
        return self.devices if self.devices else int(self.share is not None or self.partition is not None)

    @property
    def milli_per_device(self) -> int:
        """Compute taken from each touched device, in milli-device units."""
        if self.share is not None:
            return self.share.compute_milli
        return MILLI if self.devices else 0

    @property
    def total_milli(self) -> int:
        """Compute taken in total, in milli-device units (a partition counts as its share)."""
        return self.milli_per_device * self.device_count

    def shape(self) -> tuple[object, ...]:
        """The resource shape: two requests with the same shape score identically everywhere."""
        share = (self.share.compute_milli, self.share.memory_bytes) if self.share else None
        return (self.cpu_milli, self.memory_bytes, self.devices, share, self.partition, self.selector,
                self.topology)
