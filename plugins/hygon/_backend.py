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

The backend is a :class:`~accel.plugins._cli.CliBackend`, so a DCU that falls off the bus (the
tool stops listing it) is still reported with its last identity, ``Health(operational=LOST)``
and a ``DeviceLost`` condition (``hygon.tool:device-missing``), without telemetry; over a replay
:meth:`~accel.plugins._cli.CliBackend.inject_fault` simulates that for the conformance kit.
"""

from __future__ import annotations

import socket
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

from accel.errors import AccelError, BackendUnavailableError, ParseError, ToolError, ToolTimeoutError
from accel.model import (
    Binding,
    Device,
    DeviceKind,
    Domain,
    DomainKind,
    Health,
    Host,
    HostInventory,
    Link,
    LinkType,
    SourceInfo,
)
from accel.plugin import BackendConfig
from accel.plugins._cli import (
    CliBackend,
    Snapshot,
    ToolSession,
    bounded,
    is_masked,
    out_of_bounds_errors,
    problems_of,
    unread_units,
)
from accel.plugins.amd.layers import Flavor, GpuReading, build_devices, merge, read_cards, telemetry_for
from accel.sysfs import enrich_inventory, scan_pci
from accel.tools import Runner, ToolResult

from . import DTK_PATHS, HYSMI_PATHS
from ._parse import Agent, ConciseRow, Topology, parse_concise, parse_json, parse_rocminfo, parse_showtopo

__all__ = ["HYGON", "JSON_ARGS", "HygonBackend"]

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


@dataclass
class _Snapshot:
    devices: list[Device]
    groups: list[list[GpuReading]]
    links: list[Link]
    domains: list[Domain]
    notes: list[str]
    invocations: int
    tool: str
    #: Records (and whole outputs) that failed to parse: ``Snapshot.problems``.
    errors: tuple[AccelError, ...] = ()


def _unread_binding(index: int | None) -> Binding:
    """The binding of a DCU known only by its index (its row failed to parse)."""
    return Binding(
        visible_env=HYGON.visible_env,
        visible_id=str(index) if index is not None else None,
        torch_device_type=HYGON.torch_device_type,
        collective_backend=HYGON.collective_backend,
        ray_resource=HYGON.ray_resource,
        device_nodes=("/dev/kfd",),
    )


class HygonBackend(CliBackend):
    """An open Hygon backend over a :class:`~accel.tools.Runner` (real, or replay in tests).

    Reads, lost-device detection and fault injection are :class:`~accel.plugins._cli.CliBackend`'s;
    this class runs the tools and builds each :class:`~accel.plugins._cli.Snapshot`.
    """

    def __init__(self, config: BackendConfig, runner: Runner) -> None:
        super().__init__("hygon", self._snapshot, config=config, runner=runner)
        self._config = config
        timeout = config.tool_timeout_s
        if runner.which("hy-smi", HYSMI_PATHS):
            self._smi = ToolSession(runner, "hy-smi", search_path=HYSMI_PATHS, timeout_s=timeout)
        elif runner.which("rocm-smi", DTK_PATHS):
            self._smi = ToolSession(runner, "rocm-smi", search_path=DTK_PATHS, timeout_s=timeout)
        else:
            raise BackendUnavailableError(
                f"Hygon backend unavailable: neither hy-smi ({', '.join(HYSMI_PATHS)}) nor the DTK rocm-smi "
                f"({', '.join(DTK_PATHS)}) was found",
                plugin="hygon",
            )
        self._rocminfo = (
            ToolSession(runner, "rocminfo", search_path=DTK_PATHS, timeout_s=timeout)
            if runner.which("rocminfo", DTK_PATHS)
            else None
        )
        self._notes: SourceInfo | None = None  # the notes of the last snapshot (see inventory)

    # -- collection ---------------------------------------------------------------------------
    def _snapshot(self) -> Snapshot:
        snap = self._run_tools()
        main, *notes = self._sources(snap)
        self._notes = notes[0] if notes else None
        now = datetime.now(UTC)
        # A concise row that failed to parse but names its DCU is listed, health unknown.
        unread = unread_units(
            snap.errors, snap.devices, vendor="hygon", kind=HYGON.kind, tool=snap.tool, binding=_unread_binding
        )
        problems = problems_of("hygon", snap.errors)
        return Snapshot(
            devices=(*snap.devices, *unread),
            telemetry=tuple(
                telemetry_for(d, g, now, unsupported=("clocks_hertz", "throttle_reasons"))
                for d, g in zip(snap.devices, snap.groups, strict=True)
            ),
            links=tuple(snap.links),
            domains=tuple(snap.domains),
            source=main,
            collected_at=now,
            unparsed=len(problems),
            problems=problems,
        )

    def _run_tools(self) -> _Snapshot:
        smi = self._smi
        start = smi.invocations + (self._rocminfo.invocations if self._rocminfo else 0)
        notes: list[str] = []
        failures: list[AccelError] = []
        errors: list[AccelError] = []
        json_readings: dict[int, GpuReading] = {}
        json_ok = False
        res = self._optional(smi, JSON_ARGS, notes, failures)
        if res is not None:
            try:
                readings, found, unit = parse_json(res.stdout, smi.context(*JSON_ARGS))
                json_readings = {r.index or 0: r for r in readings}
                json_ok = True
                errors += found
                notes += [str(e) for e in found]
                if unit:
                    notes.append(f"memory unit in the JSON keys: {unit}")
            except ParseError as exc:
                failures.append(exc)
                errors.append(exc)
                notes.append(str(exc))
        concise: dict[int, ConciseRow] = {}
        res = self._optional(smi, (), notes, failures)
        if res is not None:
            try:
                rows, found_rows = parse_concise(res.stdout, smi.context())
                concise = {r.index: r for r in rows}
                errors += found_rows
                notes += [str(e) for e in found_rows]
            except ParseError as exc:
                failures.append(exc)
                errors.append(exc)
                notes.append(str(exc))
        if not json_readings and not concise:
            raise failures[0] if failures else ParseError(f"{smi.tool} reported no DCU", tool=smi.tool)
        agents: list[Agent] = []
        if self._rocminfo is not None:
            res = self._optional(self._rocminfo, (), notes, [])
            if res is not None:
                try:
                    agents = parse_rocminfo(res.stdout, self._rocminfo.context())
                except ParseError as exc:
                    notes.append(str(exc))
        topo: Topology | None = None
        res = self._optional(smi, ("--showtopo",), notes, [])
        if res is not None:
            try:
                topo = parse_showtopo(res.stdout, smi.context("--showtopo"))
                notes += [str(e) for e in topo.errors]
            except ParseError as exc:
                notes.append(str(exc))
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
        links, domains = _topology(devices, groups, topo)
        invocations = smi.invocations + (self._rocminfo.invocations if self._rocminfo else 0) - start
        return _Snapshot(devices, groups, links, domains, notes, invocations, smi.tool, tuple(errors))

    @staticmethod
    def _optional(
        session: ToolSession, args: Sequence[str], notes: list[str], failures: list[AccelError]
    ) -> ToolResult | None:
        try:
            return session.run(*args)
        except ToolTimeoutError:
            raise  # a hung tool is an error, not an absent command
        except ToolError as exc:
            failures.append(exc)
            notes.append(f"{' '.join([session.tool, *args])}: {exc.code}")
            return None

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
        root = self._config.sysfs_root
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
                layers.append(("sysfs", GpuReading(index=i, bus_id=fn.bus_id, pci_device_id=fn.device_id,
                                                   vendor_id=fn.vendor_id, numa_node=fn.numa_node)))
            if topo is not None and i in topo.numa_node:
                layers.append((f"{tool} --showtopo", GpuReading(index=i, numa_node=topo.numa_node[i])))
            merged = merge(layers)
            merged.index = i
            if merged.name is None:
                merged.name = DEVICE_NAMES.get(merged.pci_device_id or "", "Hygon DCU")
            groups.append([merged])
        return _dedupe_ids(groups)

    def _sources(self, snap: _Snapshot) -> tuple[SourceInfo, ...]:
        layers: dict[str, set[str]] = {}
        for group in snap.groups:
            for part, layer in group[0].sources.items():
                layers.setdefault(layer, set()).add(part)
        out = [
            SourceInfo(
                backend="hygon",
                plugin_version="0.1.0",
                api=snap.tool,
                detail=f"{snap.tool} (+ rocminfo, sysfs): " + "; ".join(
                    f"{layer}: {', '.join(sorted(parts - {'*'}))}" for layer, parts in sorted(layers.items())
                )[:900],
                tool_invocations=snap.invocations,
            )
        ]
        if snap.notes:
            out.append(SourceInfo(backend="hygon", plugin_version="0.1.0", api="notes",
                                  detail="; ".join(snap.notes)[:900]))
        return tuple(out)

    # -- Backend API (the rest is CliBackend's) ------------------------------------------------
    def inventory(self) -> HostInventory:
        snap = self.snapshot()
        inv = HostInventory(
            host=Host(hostname=socket.gethostname() or "localhost"),
            devices=snap.devices,
            links=snap.links,
            domains=snap.domains,
            collected_at=snap.collected_at,
            sources=tuple(s for s in (snap.source, self._notes) if s is not None),
            problems=snap.problems,
        )
        return enrich_inventory(inv, self._config.sysfs_root)

    def health(self, ids: Sequence[str] | None = None) -> dict[str, Health]:
        now = datetime.now(UTC)
        return {
            # Health is earned: checked_at only where something health-telling was read.
            i: Health(operational=h.operational, monitored=h.monitored, conditions=h.conditions,
                      checked_at=now if h.monitored else h.checked_at)
            for i, h in super().health(ids).items()
        }


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


def _topology(
    devices: Sequence[Device], groups: Sequence[Sequence[GpuReading]], topo: Topology | None
) -> tuple[list[Link], list[Domain]]:
    if topo is None:
        return [], []
    by_index = {g[0].index: d.id for d, g in zip(devices, groups, strict=True)}
    links: list[Link] = []
    parent: dict[str, str] = {}

    def find(x: str) -> str:
        while parent.get(x, x) != x:
            x = parent[x]
        return x

    for a, b in topo.xgmi_pairs():
        ia, ib = by_index.get(a), by_index.get(b)
        if ia is None or ib is None or ia == ib:
            continue
        x, y = sorted((ia, ib))
        links.append(Link(a=x, b=y, type=LinkType.XGMI, count=1))
        parent[find(x)] = find(y)
    comps: dict[str, list[str]] = {}
    for d in devices:
        if d.id in parent or any(d.id in (lk.a, lk.b) for lk in links):
            comps.setdefault(find(d.id), []).append(d.id)
    domains = [
        Domain(id=f"hygon-xgmi-{n}", kind=DomainKind.XGMI_HIVE, members=tuple(members))
        for n, members in enumerate(sorted(comps.values()))
        if len(members) >= 2
    ]
    return links, domains
