"""The Hygon DCU backend: hy-smi (or DTK rocm-smi) and rocminfo, on the AMD plugin's layers.

Per snapshot it runs at most four commands (``tool_invocations`` in the inventory's source says
how many it took):

1. ``<smi> --showid --showmeminfo vram --showpower --showserial --showuse --showtemp
   --showproductname --showuniqueid --json`` - identity, memory (MiB), power, temperatures, load;
2. ``<smi>`` - the concise table: power cap, performance level, mode, fan, load;
3. ``rocminfo`` (when installed) - gfx target, marketing name and compute units, joined on the
   unique id (``Uuid: GPU-<unique id>``);
4. ``<smi> --showtopo`` - xGMI / HSW links and NUMA nodes.

``<smi>`` is ``hy-smi`` from ``/opt/hyhal/bin`` when present, else the DTK ``rocm-smi``.  Only
the first two are required (either suffices); a missing or failing secondary command is noted in
the sources and never hides the devices.  A hung tool raises
:class:`~accel.errors.ToolTimeoutError`.  PCI bus ids come from sysfs (vendor ``1d94``), paired
by unique id when the amdgpu-style files expose it, else in enumeration order when the counts
agree.

Or the ROCm SMI library of the DTK (``librocm_smi64.so``, the ``rsmi_*`` interface):
``-o read=native|cli|auto`` picks the path (:class:`~accel.toolkit.DualPathBackend`).  The
native readings go through the same merge (sysfs pairing, names, duplicate ids) and the same
AMD-layer assembly as the tool's; the library adds ECC counts (health) and xGMI link types.

The backend is a :class:`~accel.toolkit.ToolBackend`, so a DCU that falls off the bus (the
tool stops listing it) is still reported with its last identity, ``Health(operational=LOST)``
and a ``DeviceLost`` condition (``hygon.tool:device-missing``), without telemetry; over a replay
:meth:`~accel.toolkit.ToolBackend.inject_fault` simulates that for the conformance kit.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import TypeVar

from accel.errors import AccelError, ParseError
from accel.model import Device, DeviceKind, DomainKind, Health, Link, LinkType, SourceInfo
from accel.plugin import BackendConfig
from accel.plugins.amd.layers import Flavor, GpuReading, build_devices, merge, read_cards, telemetry_for
from accel.sysfs import scan_pci
from accel.toolkit import (
    Collection,
    DualPathBackend,
    NativeLibrary,
    ParseContext,
    Snapshot,
    ToolSession,
    bounded,
    is_masked,
    link_domains,
    out_of_bounds_errors,
)
from accel.tools import Runner

from . import _native
from ._parse import (
    Agent,
    ConciseRow,
    Topology,
    parse_concise,
    parse_json,
    parse_rocminfo,
    parse_showtopo,
)
from ._plugin import DTK_PATHS, HYSMI_PATHS

__all__ = ["HYGON", "JSON_ARGS", "HygonBackend"]

V = TypeVar("V")

HYGON = Flavor(vendor="hygon", kind=DeviceKind.DCU, pci_vendor_id="1d94", extras_domain="hygon.com")

JSON_ARGS = (
    "--showid",
    "--showmeminfo",
    "vram",
    "--showpower",
    "--showserial",
    "--showuse",
    "--showtemp",
    "--showproductname",
    "--showuniqueid",
    "--json",
)

#: PCI device id -> product, from the reference (vendors.md section 5).
DEVICE_NAMES = {"6210": "K100_AI", "55b7": "Z100L"}

#: Parts these tools never print; listed as unsupported when still empty.
_NEVER = (
    "architecture",  # DCU gfx targets (gfx928...) have no published architecture family
    "serial_number",  # listed only where the tool printed none (or a masked one)
    "firmware",
    "max_clock_hertz",
    "memory_max_clock_hertz",
    "temp_slowdown_celsius",
    "temp_shutdown_celsius",
    "power_cap_default_watts",
    "power_cap_min_watts",
    "power_cap_max_watts",
    "ecc_enabled",
    "ecc_supported",
    "form_factor",
    "driver_version",
    "memory_generation",
)
#: Parts that only the --json query gives.
_JSON_ONLY = ("memory_total_bytes", "memory_used_bytes", "serial_number", "uuid")


class HygonBackend(DualPathBackend):
    """Backend ``hygon`` over a :class:`~accel.tools.Runner` (real, or replay in tests).

    Reads, lost-device detection and fault injection are :class:`~accel.toolkit.ToolBackend`'s;
    :meth:`collect` runs the tools and builds the devices with the AMD plugin's layers.
    """

    backend_name = "hygon"
    tool = "hy-smi"
    kind = HYGON.kind
    visible_env = HYGON.visible_env
    torch_device_type = HYGON.torch_device_type
    collective_backend = HYGON.collective_backend
    ray_resource = HYGON.ray_resource
    device_nodes = ("/dev/kfd",)
    fills_from_sysfs = True
    library = _native.LIBRARY
    native_table = _native.TABLE
    native_errors = _native.ERRORS

    def __init__(self, config: BackendConfig, runner: Runner) -> None:
        super().__init__(config, runner)
        self._rocminfo = runner.which("rocminfo", DTK_PATHS) is not None

    # The native path needs no tool: nothing to look for (the tool path: hy-smi, else DTK rocm-smi).
    @property
    def alternatives(self) -> tuple[tuple[str, tuple[str, ...]], ...]:  # type: ignore[override]
        if getattr(self, "native", None) is not None:
            return ()
        return (("hy-smi", HYSMI_PATHS), ("rocm-smi", DTK_PATHS))

    def load_native(self) -> object:
        return _native.load_rsmi()

    def fake_native(self, runner: Runner) -> object:
        from ._native_fake import fake_of_replay

        return fake_of_replay(runner)

    def collect_native(self, col: Collection, lib: NativeLibrary) -> Snapshot:
        """The ``rsmi_*`` read, merged and assembled as the tool's readings are."""
        read = _native.read_rsmi(lib)
        col.problems.extend(read.problems)
        tool = self.library
        groups = self._merge({r.index or 0: r for r in read.readings}, {}, [], None, tool)
        never = set(_NEVER) | {"architecture", "isa", "compute_units"} | read.never
        if all(g[0].bus_id is None for g in groups):
            never.add("bus_id")
        if all(g[0].numa_node is None for g in groups):
            never.add("numa_node")
        checked = [[bounded(r) for r in g] for g in groups]
        groups = [[r for r, _ in g] for g in checked]
        devices, _, _ = build_devices(groups, HYGON, unsupported=never)
        for d, g in zip(devices, checked, strict=True):
            for r, dropped in g:
                col.problems.extend(out_of_bounds_errors(tool, dropped, device_id=d.id, what=f"DCU {r.index}"))
        by_index = {g[0].index: d.id for d, g in zip(devices, groups, strict=True)}
        links = []
        for a, b in read.xgmi_pairs:
            ia, ib = by_index.get(a), by_index.get(b)
            if ia is not None and ib is not None and ia != ib:
                x, y = sorted((ia, ib))
                links.append(Link(a=x, b=y, type=LinkType.XGMI, count=1))
        domains = link_domains(links, DomainKind.XGMI_HIVE, prefix="hygon-xgmi", order=[d.id for d in devices])
        samples = [
            telemetry_for(d, g, col.now, unsupported=("clocks_hertz", "throttle_reasons", "fan_ratio"))
            for d, g in zip(devices, groups, strict=True)
        ]
        self._ecc_seen = {(g[0].index or 0): (g[0].ecc_total.uncorrectable if g[0].ecc_total else None) for g in groups}
        self._ids = by_index
        return col.snapshot(devices, samples, links=links, domains=domains)

    def collect_cli(self, col: Collection) -> Snapshot:
        smi, notes, errors = col.session, col.notes, col.problems
        # Either of the JSON query and the concise table suffices; both failing is the error,
        # and an unreadable one is a problem of the snapshot.
        failures: list[AccelError] = []
        json_readings: dict[int, GpuReading] = {}
        parsed = _view(smi, JSON_ARGS, parse_json, notes, failures=failures, errors=errors)
        if parsed is not None:
            readings, found, unit = parsed
            json_readings = {r.index or 0: r for r in readings}
            errors += found
            notes += [str(e) for e in found]
            if unit:
                notes.append(f"memory unit in the JSON keys: {unit}")
        concise: dict[int, ConciseRow] = {}
        table = _view(smi, (), parse_concise, notes, failures=failures, errors=errors)
        if table is not None:
            concise = {r.index: r for r in table[0]}
            errors += table[1]
            notes += [str(e) for e in table[1]]
        if not json_readings and not concise:
            raise failures[0] if failures else ParseError(f"{smi.tool} reported no DCU", tool=smi.tool)
        # rocminfo and --showtopo only add to the picture: an unreadable one is a note.
        agents: list[Agent] = []
        if self._rocminfo:
            agents = _view(col.session_for("rocminfo", DTK_PATHS), (), parse_rocminfo, notes) or []
        topo = _view(smi, ("--showtopo",), parse_showtopo, notes)
        if topo is not None:
            notes += [str(e) for e in topo.errors]
        json_ok = parsed is not None
        groups = self._merge(json_readings, concise, agents, topo, smi.tool)
        never = set(_NEVER) | ({"architecture", "isa", "compute_units"} if not agents else set())
        if not json_ok:
            never |= set(_JSON_ONLY)
        if all(g[0].bus_id is None for g in groups):
            never.add("bus_id")
        if topo is None or not topo.numa_node:
            never.add("numa_node")
        # A value no device can have (a mangled cell, a sentinel read as a number) is left
        # out as unknown and reported, so the device is still listed.
        checked = [[bounded(r) for r in g] for g in groups]
        groups = [[r for r, _ in g] for g in checked]
        devices, _, _ = build_devices(groups, HYGON, unsupported=never)
        ids = [d.id for d in devices] if len(devices) == len(groups) else [None] * len(groups)
        for dev_id, g in zip(ids, checked, strict=True):
            for r, dropped in g:
                errors += out_of_bounds_errors(smi.tool, dropped, device_id=dev_id, what=f"card {r.index}")
        links = _xgmi_links(devices, groups, topo)
        domains = link_domains(links, DomainKind.XGMI_HIVE, prefix="hygon-xgmi", order=[d.id for d in devices])
        # A concise row that failed to parse but names its DCU is listed, health unknown.
        unread = self.unread(col, devices)
        samples = [
            telemetry_for(d, g, col.now, unsupported=("clocks_hertz", "throttle_reasons"))
            for d, g in zip(devices, groups, strict=True)
        ]
        snap = col.snapshot([*devices, *unread], samples, links=links, domains=domains)
        main = _source(smi.tool, groups, col.invocations)
        extra = (SourceInfo(backend="hygon", plugin_version=self.version, api="notes",
                            detail="; ".join(notes)[:900]),) if notes else ()  # fmt: skip
        return dataclasses.replace(snap, source=main, extra_sources=extra)

    def _merge(
        self,
        json_readings: dict[int, GpuReading],
        concise: dict[int, ConciseRow],
        agents: list[Agent],
        topo: Topology | None,
        tool: str,
    ) -> list[list[GpuReading]]:
        indices = sorted(set(json_readings) | set(concise))
        by_uid = {a.unique_id: a for a in agents if a.unique_id}
        root = self.config.sysfs_root
        cards = read_cards(root, (HYGON.pci_vendor_id,))
        cards_by_uid = {c.unique_id: c for c in cards if c.unique_id}
        functions = scan_pci(root, vendor_ids=(HYGON.pci_vendor_id,))
        groups = []
        for pos, i in enumerate(indices):
            layers: list[tuple[str, GpuReading]] = []
            j = json_readings.get(i)
            if j is not None:
                layers.append((tool, j))
            row = concise.get(i)
            if row is not None:
                c = GpuReading(
                    index=i,
                    power_watts=row.power_watts,
                    power_cap_watts=row.power_cap_watts,
                    fan_ratio=row.fan_ratio,
                    utilization_ratio=row.utilization_ratio,
                    performance_level=row.performance_level,
                    mode=row.mode,
                )
                if row.temperature_celsius is not None:
                    # The concise Temp column is the edge sensor (AMD's header says "Temp (DieEdge)").
                    c.temperatures_celsius["edge"] = row.temperature_celsius
                layers.append((f"{tool} (concise)", c))
            uid = j.unique_id if j is not None else None
            agent = by_uid.get(uid) if uid else None
            if agent is None and len(agents) == 1 and len(indices) == 1:
                agent = agents[0]
            if agent is not None:
                a = GpuReading(index=i, compute_units=agent.compute_units)
                a.isa = agent.name if agent.name and agent.name.startswith("gfx") else None
                a.name = agent.marketing_name if agent.marketing_name and not is_masked(agent.marketing_name) else None
                a.unique_id = agent.unique_id
                layers.append(("rocminfo", a))
            card = cards_by_uid.get(uid) if uid else None
            if card is None and len(cards) == len(indices):
                card = cards[pos]  # same enumeration order as the tool (KFD / DRM order)
            if card is not None:
                layers.append(("sysfs", card))
            elif len(functions) == len(indices):
                fn = functions[pos]  # PCI functions only (no DRM files): bus id and PCI ids
                layers.append(
                    (
                        "sysfs",
                        GpuReading(
                            index=i,
                            bus_id=fn.bus_id,
                            pci_device_id=fn.device_id,
                            vendor_id=fn.vendor_id,
                            numa_node=fn.numa_node,
                        ),
                    )
                )
            if topo is not None and i in topo.numa_node:
                layers.append((f"{tool} --showtopo", GpuReading(index=i, numa_node=topo.numa_node[i])))
            merged = merge(layers)
            merged.index = i
            if merged.name is None:
                merged.name = DEVICE_NAMES.get(merged.pci_device_id or "", "Hygon DCU")
            groups.append([merged])
        return _dedupe_ids(groups)

    def health(self, ids: Sequence[str] | None = None) -> dict[str, Health]:
        now = datetime.now(UTC)
        return {
            # Health is earned: checked_at only where something health-telling was read.
            i: Health(
                operational=h.operational,
                monitored=h.monitored,
                conditions=h.conditions,
                checked_at=now if h.monitored else h.checked_at,
            )
            for i, h in super().health(ids).items()
        }


def _view(
    session: ToolSession,
    args: Sequence[str],
    parse: Callable[[str, ParseContext], V],
    notes: list[str],
    *,
    failures: list[AccelError] | None = None,
    errors: list[AccelError] | None = None,
) -> V | None:
    """One view of a tool, parsed; ``None`` when absent (a note, and a failure when
    ``failures`` is given) or unreadable (a note, and a problem when ``errors`` is given)."""
    res = session.optional(*args, notes=notes, failures=failures)
    if res is None:
        return None
    try:
        return parse(res.stdout, session.context(*args))
    except ParseError as exc:
        notes.append(str(exc))
        if errors is not None:
            errors.append(exc)
        if failures is not None:
            failures.append(exc)
        return None


def _source(tool: str, groups: Sequence[Sequence[GpuReading]], invocations: int) -> SourceInfo:
    """The main source: which layer (tool view, rocminfo, sysfs) each reading came from."""
    layers: dict[str, set[str]] = {}
    for group in groups:
        for part, layer in group[0].sources.items():
            layers.setdefault(layer, set()).add(part)
    detail = "; ".join(f"{layer}: {', '.join(sorted(parts - {'*'}))}" for layer, parts in sorted(layers.items()))
    return SourceInfo(
        backend="hygon",
        plugin_version=HygonBackend.version,
        api=tool,
        detail=f"{tool} (+ rocminfo, sysfs): {detail}"[:900],
        tool_invocations=invocations,
    )


def _dedupe_ids(groups: list[list[GpuReading]]) -> list[list[GpuReading]]:
    """Two DCUs printing the same unique id (placeholder firmware values) lose it: the id then
    falls back to the PCI address, so one inventory never holds a duplicate."""
    seen: dict[str, int] = {}
    for g in groups:
        uid = g[0].unique_id
        if uid:
            seen[uid] = seen.get(uid, 0) + 1
    for g in groups:
        if g[0].unique_id and seen[g[0].unique_id] > 1:
            g[0].unique_id = None
    return groups


def _xgmi_links(devices: Sequence[Device], groups: Sequence[Sequence[GpuReading]], topo: Topology | None) -> list[Link]:
    """One xGMI link per pair ``--showtopo`` prints as joined by xGMI."""
    if topo is None:
        return []
    by_index = {g[0].index: d.id for d, g in zip(devices, groups, strict=True)}
    links: list[Link] = []
    for a, b in topo.xgmi_pairs():
        ia, ib = by_index.get(a), by_index.get(b)
        if ia is None or ib is None or ia == ib:
            continue
        x, y = sorted((ia, ib))
        links.append(Link(a=x, b=y, type=LinkType.XGMI, count=1))
    return links
