"""The commands behind ``accel``: each builds a session, reads, and renders text or JSON."""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ..discovery import DiscoveryReport, EntryStatus, Session, discover, open_session
from ..errors import BackendUnavailableError, ConfigError, DeviceError, ProfileError
from ..model import Device, Domain, Health, HostInventory, Problem, Telemetry, json_schema, validate
from ..plugin import BackendConfig
from ..sim import ENV_PROFILE
from . import EXIT_NO_DEVICES, EXIT_OK, EXIT_PARTIAL, EXIT_UNHEALTHY, _registry, _render, dump
from ._partial import Reads, problem_line

__all__ = ["dispatch", "problem_line"]


def _parse_options(items: list[str]) -> dict[str, str]:
    options: dict[str, str] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise ConfigError(f"--option expects KEY=VALUE, got {item!r}")
        options[key.strip()] = value.strip()
    return options


def _configs(args: argparse.Namespace) -> tuple[list[str] | None, dict[str, BackendConfig], BackendConfig]:
    options = _parse_options(getattr(args, "option", []) or [])
    backends: list[str] | None = list(args.backend) if getattr(args, "backend", None) else None
    runner = None
    if getattr(args, "replay", None):
        from ..tools import ReplayRunner

        if not Path(args.replay).is_dir():
            raise ConfigError(f"--replay: {args.replay!r} is not a directory")
        runner = ReplayRunner(args.replay)
    sysfs = getattr(args, "sysfs", None)
    if sysfs is None and runner is not None and (Path(args.replay) / "sysfs").is_dir():
        sysfs = str(Path(args.replay) / "sysfs")  # a bug-report bundle carries its sysfs copy
    if sysfs is not None and not Path(sysfs).is_dir():
        raise ConfigError(f"--sysfs: {sysfs!r} is not a directory")
    # The parser checked it (finite, > 0, at most a day); a Namespace built by hand is checked too.
    timeout = getattr(args, "timeout", 10.0)
    if not isinstance(timeout, int | float) or not math.isfinite(timeout) or not 0 < timeout <= 86400:
        raise ConfigError(f"--timeout must be a finite number of seconds > 0 and <= 86400, got {timeout!r}")
    timeout = float(timeout)
    # Replays, fakes and the simulator describe another machine: do not mix in this host's /sys.
    synthetic = runner is not None or "scenario" in options or bool(getattr(args, "sim", None))
    base = BackendConfig(
        options=options,
        sysfs_root=Path(sysfs) if sysfs else Path("/sys"),
        runner=runner,
        tool_timeout_s=timeout,
        probe_timeout_s=max(timeout, 1.0),
        enrich_from_sysfs=bool(sysfs) or not synthetic,
    )
    configs: dict[str, BackendConfig] = {}
    if getattr(args, "sim", None):
        sim_options = {**options, "profile": args.sim}
        configs["sim"] = BackendConfig(
            options=sim_options, tool_timeout_s=timeout, probe_timeout_s=max(timeout, 1.0), enrich_from_sysfs=False
        )
        backends = sorted(set(backends or []) | {"sim"})
    return backends, configs, base


def _config_failures(session: Session, names: list[str]) -> None:
    """Raise the configuration error of a backend that ``names`` selected (exit 2), and, when no
    backend opened at all, the first configuration error of any: a bad setting, not a machine
    without accelerators (exit 3), is then the answer."""
    failed = [e for e in session.report.entries if e.status is EntryStatus.FAILED]
    config_errors = [e for e in failed if isinstance(e.error, (ConfigError, ProfileError))]
    for entry in config_errors:
        if entry.name in names or not session.backends:
            session.close()
            assert entry.error is not None
            raise entry.error


def _session(args: argparse.Namespace) -> Session:
    backends, configs, base = _configs(args)
    session = open_session(configs, default_config=base, backends=backends)
    # ACCEL_SIM=<profile> selects the simulator as surely as --sim does: a bad profile is bad configuration.
    env_sim = ["sim"] if os.environ.get(ENV_PROFILE, "").strip() and not getattr(args, "sim", None) else []
    _config_failures(session, env_sim)
    if backends:
        # The user named these backends: a failure to open one of them is the answer, not a warning.
        for name in backends:
            entry = session.report.entry(name)
            fatal = isinstance(entry.error, (ConfigError, ProfileError)) or not session.backends
            if entry.status is EntryStatus.FAILED and entry.error is not None and fatal:
                session.close()
                raise entry.error
            if entry.status is EntryStatus.FAILED and entry.error is None and not session.backends:
                session.close()
                raise BackendUnavailableError(f"backend {name!r}: {entry.reason}", plugin=name)
            if entry.status is EntryStatus.ABSENT and not session.backends:
                session.close()
                raise BackendUnavailableError(f"backend {name!r} is absent: {entry.reason}", plugin=name)
    return session


def _warn_failures(report: DiscoveryReport, *, only_selected: bool = True) -> None:
    for entry in report.entries:
        if entry.status is EntryStatus.FAILED and (entry.stage is not None and entry.stage.value in ("open", "read")):
            print(f"accel: warning: backend {entry.name}: {entry.reason}", file=sys.stderr)


def _warn_problems(inv: HostInventory) -> None:
    """One stderr line per problem of ``inv`` (backend failures included): see :mod:`._partial`."""
    Reads().warn(inv.problems)


def _read_code(inv: HostInventory) -> int:
    """0 for a complete read, :data:`EXIT_PARTIAL` when something could not be read."""
    return EXIT_OK if inv.complete else EXIT_PARTIAL


def _no_devices(session: Session, inv: HostInventory) -> bool:
    if inv.devices:
        return False
    read_failures = [e for e in session.report.entries if e.stage is not None and e.stage.value == "read" and e.error]
    if read_failures and read_failures[0].error is not None:
        # Every backend that opened failed to read: that failure is the answer.
        raise read_failures[0].error
    if not session.backends:
        failed = [e for e in session.report.entries if e.status is EntryStatus.FAILED]
        extra = f" ({len(failed)} failed, see `accel plugins`)" if failed else ""
        print(
            f"accel: no accelerator found on this machine{extra}; try `accel ls --sim dgx-h100` "
            "or `accel sim profiles`",
            file=sys.stderr,
        )
    else:
        print("accel: the present backends report no devices", file=sys.stderr)
    return True


def _selected(inv: HostInventory, args: argparse.Namespace) -> HostInventory:
    """``inv`` limited to the devices of ``-i/--id`` (all of them without it): their partitions,
    processes, the links and domains among them; every problem is kept (what could not be read
    is still not read).  An unknown device is a :class:`DeviceError` (exit 1)."""
    wanted = getattr(args, "ids", None)
    if not wanted:
        return inv
    keys = [k.strip() for k in wanted.split(",")]
    if any(not k for k in keys):
        raise ConfigError(f"-i/--id: an empty device in {wanted!r}")
    ids = {_find(inv, k).id for k in keys}
    parts = {p.id for p in inv.partitions if p.parent_id in ids}
    data = {
        **dict(inv),
        "devices": [d for d in inv.devices if d.id in ids],
        "partitions": [p for p in inv.partitions if p.id in parts],
        "partition_profiles": [p for p in inv.partition_profiles if p.parent_id in ids],
        "processes": [p for p in inv.processes if p.device_id in ids],
        "links": [x for x in inv.links if x.a in ids | parts and x.b in ids | parts],
        "domains": [d for d in inv.domains if set(d.members) <= ids | parts],
    }
    return validate(HostInventory, data, what="selected inventory")


def _positions(inv: HostInventory) -> dict[str, int]:
    return {d.id: i for i, d in enumerate(inv.devices)}


def _query(args: argparse.Namespace) -> tuple[list[Any], Any] | None:
    """The parsed ``--query`` fields and ``--format`` (``None`` without ``--query``)."""
    if args.query is None:
        if args.query_format != "csv":
            raise ConfigError("--format needs --query FIELD,...")
        return None
    from . import _query

    return _query.parse_query(args.query), _query.parse_format(args.query_format)


def _query_rows(inv: HostInventory, samples: Sequence[Telemetry]) -> list[tuple[Device, Telemetry | None]]:
    by_id = {s.device_id: s for s in samples}
    return [(d, by_id.get(d.id)) for d in inv.devices]


def _ls_once(args: argparse.Namespace, session: Session, query: tuple[list[Any], Any] | None, shown: int) -> int:
    """One ``accel ls`` read and print (``shown``: earlier reads of ``--loop``, which print no
    second CSV header)."""
    full = session.inventory()
    inv = _selected(full, args)
    if not inv.devices and _no_devices(session, inv):
        if args.json and query is None:
            print(inv.model_dump_json(indent=2))
        return EXIT_NO_DEVICES
    _warn_problems(inv)
    if query is not None:
        from ._query import render

        samples = session.telemetry([d.id for d in inv.devices])
        print(render(query[0], _query_rows(inv, samples), query[1], header=shown == 0), flush=True)
    elif args.list_gpus:
        from ._smi import list_gpus

        print(list_gpus(inv, _positions(full)), flush=True)
    elif args.json:
        print(inv.model_dump_json(indent=2), flush=True)
    else:
        print(_render.device_table(inv, _positions(full)), flush=True)
    return _read_code(inv)


def cmd_ls(args: argparse.Namespace) -> int:
    query = _query(args)
    if getattr(args, "list_gpus", False) and (query is not None or args.json):
        raise ConfigError("-L/--list-gpus prints its own lines: not with --query or --json")
    loop = getattr(args, "loop", None)
    if getattr(args, "count", 0) and loop is None:
        raise ConfigError("--count needs -l/--loop SECONDS")
    with _session(args) as session:
        shown, worst = 0, EXIT_OK
        while True:
            if shown and loop is not None:
                time.sleep(loop)
            code = _ls_once(args, session, query, shown)
            shown += 1
            if code == EXIT_NO_DEVICES:
                return code
            worst = max(worst, code)  # one partial read makes the whole run partial
            if loop is None or (args.count and shown >= args.count):
                return worst


def _ps_query(args: argparse.Namespace, inv: HostInventory, full: HostInventory) -> None:
    from ._query import parse_format, parse_process_query, render

    fields, fmt = parse_process_query(args.query), parse_format(args.query_format)
    devices, position = {d.id: d for d in full.devices}, _positions(full)
    # nvidia-smi's order: by device (its place in `accel ls`), then pid.
    ordered = sorted(inv.processes, key=lambda p: (position.get(p.device_id, len(position)), p.pid))
    rows = [(p, devices.get(p.device_id)) for p in ordered]
    text = render(fields, rows, fmt)
    if text:
        print(text)


def cmd_ps(args: argparse.Namespace) -> int:
    """Processes on every device (like ``nvidia-smi``'s process table, for every vendor)."""
    if getattr(args, "query", None) is None and getattr(args, "query_format", "csv") != "csv":
        raise ConfigError("--format needs --query FIELD,...")
    with _session(args) as session:
        full = session.inventory()
        inv = _selected(full, args)
        if not inv.devices and _no_devices(session, inv):
            return EXIT_NO_DEVICES
        _warn_problems(inv)
        if getattr(args, "query", None) is not None:
            _ps_query(args, inv, full)
        elif args.json:
            print(dump({"processes": [p.model_dump(mode="json") for p in inv.processes],
                        "problems": [p.model_dump(mode="json") for p in inv.problems], "complete": inv.complete}))
        elif inv.processes:
            print(_render.process_table(inv, _positions(full)))
        else:
            print("no processes reported on any device", file=sys.stderr)
        return _read_code(inv)


def _find(inv: HostInventory, key: str) -> Device:
    for dev in inv.devices:
        if key in (dev.id, dev.uuid, dev.pci.bus_id if dev.pci else None):
            return dev
    # A list position: ASCII digits only ('²' is a digit to str.isdigit, not to int), and short
    # (a 5,000-digit index is no position, and past Python's integer-string limit).
    if key.isascii() and key.isdigit() and len(key) <= 9 and int(key) < len(inv.devices):
        return inv.devices[int(key)]
    shown = repr(key) if len(key) <= 80 else f"{key[:40]!r}... ({len(key)} characters)"
    raise DeviceError(f"no device {shown}; `accel ls` lists the ids", device_id=key[:200])


def cmd_show(args: argparse.Namespace) -> int:
    with _session(args) as session:
        inv = session.inventory()
        if _no_devices(session, inv):
            return EXIT_NO_DEVICES
        _warn_problems(inv)
        if (args.device is None) == (args.show_id is None):
            raise ConfigError("accel show takes one device: the positional argument or -i/--id")
        dev = _find(inv, args.device if args.device is not None else args.show_id)
        print(dev.model_dump_json(indent=2) if args.json else _render.device_text(dev))
        return _read_code(inv)


def _domains_of(full: HostInventory, inv: HostInventory) -> list[Domain]:
    """The domains with a member among ``inv``'s devices or partitions, whole (an NVLink island
    of eight is shown as eight even when ``-i 0,1`` selects two of them)."""
    selected = {d.id for d in inv.devices} | {p.id for p in inv.partitions}
    return [d for d in full.domains if selected & set(d.members)]


def cmd_topo(args: argparse.Namespace) -> int:
    with _session(args) as session:
        full = session.inventory()
        inv = _selected(full, args)
        domains = _domains_of(full, inv)
        _warn_problems(inv)
        matrix = inv.distance_matrix()
        if args.json:
            n = len(matrix.device_ids)
            doc = {
                "devices": list(matrix.device_ids),
                "matrix": [[matrix.levels[i][j].value for j in range(n)] for i in range(n)],
                "labels": [[matrix.label(i, j) for j in range(n)] for i in range(n)],
                "pcie": [[matrix.pcie_levels[i][j].value for j in range(n)] for i in range(n)],
                "links": [link.model_dump(mode="json") for link in inv.links],
                "domains": [d.model_dump(mode="json") for d in domains],
                "numa": {d.id: d.numa_node for d in inv.devices},
                "cpu_affinity": {d.id: d.cpu_affinity for d in inv.devices},
                "problems": [p.model_dump(mode="json") for p in inv.problems],
            }
            print(dump(doc))
            return _read_code(inv) if inv.devices else EXIT_NO_DEVICES
        if _no_devices(session, inv):
            return EXIT_NO_DEVICES
        print(_render.topo_text(inv, matrix, positions=_positions(full), domains=domains))
        return _read_code(inv)


def _with_leak_history(inv: HostInventory, path: str) -> HostInventory:
    """Add this reading to the leak history at ``path`` and put the verdicts into device health."""
    from ..leak import LeakHistory, LeakWatch

    watch, history = LeakWatch(), LeakHistory(path)
    history.load(watch.detector)
    watch.observe(inv)
    history.save(watch.detector)
    return watch.annotate(inv)


def cmd_health(args: argparse.Namespace) -> int:
    with _session(args) as session:
        # One read: the health, and what could not be read, of the same snapshot.
        full = session.inventory()
        if getattr(args, "leak_history", None):
            # The whole inventory feeds the history (a selection today is not a gap tomorrow).
            full = _with_leak_history(full, args.leak_history)
        inv = _selected(full, args)
        health: dict[str, Health] = {d.id: d.health for d in inv.devices}
        _warn_problems(inv)
        if args.json:
            print(
                dump(
                    {
                        "devices": {k: v.model_dump(mode="json") for k, v in health.items()},
                        "problems": [p.model_dump(mode="json") for p in inv.problems],
                        "complete": inv.complete,
                    }
                )
            )
        else:
            if not health and not session.backends:
                print("accel: no accelerator found; try `accel health --sim dgx-h100`", file=sys.stderr)
                return EXIT_NO_DEVICES
            print(_render.health_table(health))
        if not health:
            return EXIT_NO_DEVICES
        # "unknown" is not healthy: nothing was read that says so.
        if not all(h.state.value == "healthy" for h in health.values()):
            return EXIT_UNHEALTHY
        return _read_code(inv)


def cmd_watch(args: argparse.Namespace) -> int:
    # The parser checked both (--count 0..10^9, --interval finite seconds 0..86400).
    if args.count < 0 or not math.isfinite(args.interval) or not 0 <= args.interval <= 86400:
        raise ConfigError("--count must not be negative and --interval must be 0..86400 seconds")
    query = _query(args)
    reads = Reads()
    with _session(args) as session:
        # The inventory says which devices each refresh must sample, and what it could not read.
        full = reads.inventory(session)
        selected = _selected(full, args)
        if not selected.devices and _no_devices(session, selected):
            return EXIT_NO_DEVICES
        reads.warn(selected.problems)
        ids = [d.id for d in selected.devices] if args.ids else None
        expected = [d.id for d in selected.devices]
        shown = 0
        interactive = sys.stdout.isatty() and not args.json and query is None
        while args.count == 0 or shown < args.count:
            if shown:
                time.sleep(args.interval)
            samples, problems = reads.sample(session, expected, ids)
            if query is not None:
                from ._query import render

                print(render(query[0], _query_rows(selected, samples), query[1], header=shown == 0), flush=True)
            elif args.json:
                print(json.dumps(_refresh_json(samples, problems)), flush=True)
            else:
                if interactive:
                    print("\x1b[2J\x1b[H", end="")
                print(f"accel watch  refresh {shown + 1}  every {args.interval:g} s")
                print(_render.telemetry_table(samples), flush=True)
            shown += 1
        return reads.code()


def _refresh_json(samples: Sequence[Telemetry], problems: Sequence[Problem]) -> dict[str, Any]:
    """One refresh of ``watch --json`` / ``dmon --json``: its samples and what it could not read."""
    return {
        "samples": [s.model_dump(mode="json") for s in samples],
        "problems": [p.model_dump(mode="json") for p in problems],
        "complete": not problems,
    }


def cmd_dmon(args: argparse.Namespace) -> int:
    from . import _dmon

    cols = _dmon.columns(args.groups)
    reads = Reads()
    with _session(args) as session:
        full = reads.inventory(session)
        selected = _selected(full, args)
        if not selected.devices and _no_devices(session, selected):
            return EXIT_NO_DEVICES
        reads.warn(selected.problems)
        positions = _positions(full)
        ids = [d.id for d in selected.devices] if args.ids else None
        expected = [d.id for d in selected.devices]
        if not args.json:
            print(_dmon.header(cols), flush=True)
        shown = 0
        while args.count == 0 or shown < args.count:
            if shown:
                time.sleep(args.interval)
            samples, problems = reads.sample(session, expected, ids)
            if args.json:
                print(json.dumps(_refresh_json(samples, problems)), flush=True)
            else:
                for s in samples:
                    print(_dmon.row(s, positions.get(s.device_id, "?"), cols))
                sys.stdout.flush()
            shown += 1
        return reads.code()


def cmd_plugins(args: argparse.Namespace) -> int:
    backends, configs, base = _configs(args)
    report = discover(configs, default_config=base, backends=backends)
    if args.json:
        print(dump(report.as_dict()))
        return EXIT_OK
    rows = [
        [e.name, e.status.value, e.plugin_version or "-", str(e.api_version or "-"), e.reason or "-"]
        for e in report.entries
    ]
    print(_render.table(["BACKEND", "STATUS", "VERSION", "API", "REASON"], rows))
    return EXIT_OK


def cmd_dra(args: argparse.Namespace) -> int:
    from ..integrations.k8s import claim_templates, device_classes, nfd_features, resource_slices

    with _session(args) as session:
        inv = session.inventory()
        if not inv.devices and _no_devices(session, inv):
            return EXIT_NO_DEVICES
        # Kubernetes objects have no place for accel's problems: stderr and the exit code say it.
        _warn_problems(inv)
        if args.nfd:
            print(nfd_features(inv, domain=args.domain), end="")
            return _read_code(inv)
        if args.device_classes or args.claim_templates:
            make = device_classes if args.device_classes else claim_templates
            objects = make(inv, domain=args.domain, partitionable=args.partitionable)
            print(dump({"apiVersion": "v1", "kind": "List", "items": objects}))
            return _read_code(inv)
        projection = resource_slices(inv, domain=args.domain, node_name=args.node, partitionable=args.partitionable)
        for name, items in projection.omitted.items():
            print(f"accel: warning: {name}: not projected: {'; '.join(items)}", file=sys.stderr)
        for device_id, why in projection.withheld.items():
            print(f"accel: note: {device_id}: not published as a device: {why}", file=sys.stderr)
        print(dump({"apiVersion": "v1", "kind": "List", "items": projection.slices}))
        return _read_code(inv)


def cmd_cdi(args: argparse.Namespace) -> int:
    from pathlib import Path

    from ..integrations.k8s import cdi_specs, spec_file_name, write_specs

    with _session(args) as session:
        inv = session.inventory()
        if not inv.devices and _no_devices(session, inv):
            return EXIT_NO_DEVICES
        _warn_problems(inv)  # a CDI spec has no place for them either
        projection = cdi_specs(inv, domain=args.domain, env=args.env)
        for problem in projection.problems:
            print(f"accel: warning: cdi: {problem.code}: {problem.message}", file=sys.stderr)
        if args.out is not None:
            # A spec with no device (every one reported above) is not worth a file in /etc/cdi.
            useful = {kind: spec for kind, spec in projection.specs.items() if spec["devices"]}
            for path in write_specs(useful, Path(args.out), force=args.force):
                print(path)
        else:
            print(dump({spec_file_name(kind): spec for kind, spec in projection.specs.items()}))
        return EXIT_OK if projection.complete and inv.complete else EXIT_PARTIAL


def cmd_schema(args: argparse.Namespace) -> int:
    print(dump(json_schema(args.kind)))
    return EXIT_OK


def cmd_sim(args: argparse.Namespace) -> int:
    from ..sim._profile import list_profiles, load_profile

    rows: list[dict[str, Any]] = []
    for name in list_profiles():
        built = load_profile(name)
        rows.append(
            {
                "name": name,
                "devices": len(built.devices),
                "models": sorted({d.model for d in built.devices}),
                "description": built.profile.description,
            }
        )
    if args.json:
        print(dump(rows))
    else:
        table_rows = [[r["name"], str(r["devices"]), r["description"]] for r in rows]
        print(_render.table(["PROFILE", "DEVICES", "DESCRIPTION"], table_rows))
    return EXIT_OK


def cmd_bugreport(args: argparse.Namespace) -> int:
    """Record every tool run of the present backends into a bundle ``accel ls --replay`` replays."""
    import dataclasses

    from .. import __version__
    from .._bugreport import RecordingRunner, SysfsCopy, collect_sysfs, scenario_runner, write_bundle
    from ..tools import SubprocessRunner

    if getattr(args, "sim", None):
        raise ConfigError("bugreport records vendor tool runs; the simulator runs none (`--sim NAME` is already "
                          "reproducible by name)")
    if args.max_bytes <= 0:
        raise ConfigError("--max-bytes must be positive")
    backends, configs, base = _configs(args)
    scenario = base.options.get("scenario")
    source = base.runner
    if scenario is not None:
        # A shipped replay scenario: the flow to try without hardware (docs: getting started).
        if source is not None or not backends or len(backends) != 1:
            raise ConfigError("bugreport -o scenario=NAME records one backend's shipped scenario: give exactly one "
                              "--backend and no --replay, e.g. `accel bugreport --backend ascend -o scenario=910b-8 "
                              "--out DIR`")
        source = scenario_runner(backends[0], scenario)
        base = dataclasses.replace(base, options={k: v for k, v in base.options.items() if k != "scenario"})
    recorder = RecordingRunner(source or SubprocessRunner())
    base = dataclasses.replace(base, runner=recorder)
    configs = {name: dataclasses.replace(cfg, runner=recorder) for name, cfg in configs.items()}
    session = open_session(configs, default_config=base, backends=backends)
    with session:
        inv = session.inventory()
        names = sorted(session.backends)
    # What this machine showed, for the maintainer (not named *.json: the replayer loads those).
    extra = {"INVENTORY": inv.model_dump_json(indent=2).encode("utf-8")}
    # The sysfs attributes the enrichment read for these devices, when it read this host's.
    buses = [d.pci.bus_id for d in inv.devices if d.pci is not None]
    tree = collect_sysfs(base.sysfs_root, buses) if base.enrich_from_sysfs else SysfsCopy()
    out = write_bundle(args.out, recorder.recordings, version=__version__, backends=names,
                       max_bytes=args.max_bytes, extra=extra, sysfs=tree)
    _warn_problems(inv)
    print(f"accel: wrote {out} ({len(recorder.recordings)} tool runs, {len(inv.devices)} devices, "
          f"{len(inv.problems)} problems); replay it with `accel ls --replay {out}`", file=sys.stderr)
    return _read_code(inv)


_COMMANDS = {
    "bugreport": cmd_bugreport,
    "ls": cmd_ls,
    "show": cmd_show,
    "ps": cmd_ps,
    "topo": cmd_topo,
    "health": cmd_health,
    "watch": cmd_watch,
    "dmon": cmd_dmon,
    "plugins": cmd_plugins,
    "schema": cmd_schema,
    "sim": cmd_sim,
}


def dispatch(args: argparse.Namespace) -> int:
    fn = _COMMANDS.get(args.command)
    if fn is None:
        return _registry.run(args)  # a command of the accel.commands group
    return fn(args)
