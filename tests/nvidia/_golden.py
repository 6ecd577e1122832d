"""Golden outputs of the NVIDIA backend over every fake-NVML scenario (issue 34's guard).

For each scenario of :data:`accel.plugins.nvidia.testing.SCENARIOS` this records what a user
and a scraper see: ``accel ls --json``, ``accel show 0``, ``accel topo --json``, ``accel health
--json``, ``accel ps --json``, ``accel watch --json --count 2 --interval 0`` (each with
``--backend nvidia --option scenario=NAME``, run in-process through :func:`accel.cli.main`) and
the exporter's exposition (full and common fields, second scrape, processes on), and the NVML
calls per function of one backend session (open, two inventories and telemetries, health,
processes, partitions, profiles, events, close).  The NVIDIA
backend was split into collaborators against these files: any change in them is a change of
behaviour, to be made on purpose (``python tests/nvidia/_golden.py --write``) and reviewed.

What varies by run or machine is masked, and only that: ISO 8601 timestamps, the host name and
CPU count, the order of a one-line ``unsupported`` set (``watch --json`` prints a frozenset in
hash order), and the exporter's own timing and time-stamp samples (``*_duration_seconds``,
``*_timestamp_seconds``).  Everything else is compared byte for byte.  The files are stored
gzipped (``golden/NAME.txt.gz``, 2 MB of text otherwise).
"""

from __future__ import annotations

import argparse
import contextlib
import gzip
import io
import re
import socket
import sys
from pathlib import Path
from typing import Any

GOLDEN = Path(__file__).parent / "golden"
#: Where process names are looked up: a directory that exists nowhere, so a real process that
#: happens to have a scenario's PID (2211, 4242, 7001, ...) on the machine running the test
#: cannot change the output.
PROC_ROOT = "/nonexistent/accel-golden-proc"

COMMANDS: tuple[tuple[str, ...], ...] = (
    ("ls", "--json"),
    ("show", "0"),
    ("topo", "--json"),
    ("health", "--json"),
    ("ps", "--json"),
    ("watch", "--json", "--count", "2", "--interval", "0"),
)

_ISO = re.compile(r"\d{4}-\d\d-\d\d[T ]\d\d:\d\d:\d\d(?:\.\d+)?(?:Z|[+-]\d\d:\d\d)?")
#: Exporter samples whose value is a clock or a duration of this scrape, not a device reading.
_TIMED = re.compile(r"^(accel_[a-z_]*(?:timestamp_seconds|duration_seconds|age_seconds)(?:\{[^}]*\})?) .*$",
                    re.MULTILINE)
#: A frozenset printed on one line (``watch --json``) comes out in hash order, which varies by run.
_SET = re.compile(r'"unsupported": \[([^\]\n]+)\]')


def mask(text: str) -> str:
    """The output with what varies by run or machine replaced by a placeholder."""
    text = _ISO.sub("<TIME>", text)
    host = socket.gethostname()
    if host:
        text = re.sub(rf'"hostname": "{re.escape(host)}"', '"hostname": "<HOST>"', text)
        text = re.sub(rf'hostname="{re.escape(host)}"', 'hostname="<HOST>"', text)
    text = re.sub(r'"cpu_count": (?:\d+|null)', '"cpu_count": "<CPUS>"', text)
    text = _SET.sub(lambda m: '"unsupported": [' + ", ".join(sorted(m.group(1).split(", "))) + "]", text)
    return _TIMED.sub(r"\1 <VALUE>", text)


def _cli(argv: list[str]) -> str:
    from accel.cli import main

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            rc = main(argv)
        except SystemExit as exc:
            rc = exc.code if isinstance(exc.code, int) else 1
    return f"$ accel {' '.join(argv)}\n[rc={rc}]\n{out.getvalue()}[stderr]\n{err.getvalue()}"


def _exposition(scenario: str) -> str:
    from prometheus_client import CollectorRegistry, generate_latest

    from accel.discovery import discover
    from accel.exporter import AccelCollector, SnapshotSource, parse_fields
    from accel.plugin import BackendConfig

    parts: list[str] = []
    for profile in ("full", "common"):
        fields = parse_fields(profile, processes=True)
        config = BackendConfig(options={"scenario": scenario, "proc_root": PROC_ROOT}, enrich_from_sysfs=False,
                               readings=fields.readings)
        source = SnapshotSource(discover({"nvidia": config}, backends=["nvidia"]), {"nvidia": config}, config,
                                min_interval_s=0.0)
        try:
            registry = CollectorRegistry()
            registry.register(AccelCollector(source, processes=True, fields=fields))
            generate_latest(registry)  # the first scrape reads identity; the second is the steady state
            parts.append(f"$ exporter --fields {profile} (second scrape)\n{generate_latest(registry).decode()}")
        finally:
            source.close()
    return "".join(parts)


def _session(scenario: str, fake: Any, lines: list[str]) -> None:
    from accel.errors import AccelError
    from accel.plugin import BackendConfig
    from accel.plugins.nvidia._backend import NvidiaBackend
    from accel.plugins.nvidia._nvml import Nvml

    try:
        nv = Nvml(fake)
        nv.init()
        backend = NvidiaBackend(BackendConfig(options={"scenario": scenario, "proc_root": PROC_ROOT}), nv,
                                plugin_version="golden", scenario=scenario)
    except AccelError as err:
        lines.append(f"open failed: {err.code}")
        return
    try:
        for step in (backend.inventory, backend.telemetry, backend.inventory, backend.telemetry,
                     backend.health, backend.processes, backend.partitions, backend.partition_profiles,
                     backend.poll_events):
            try:
                step()
            except AccelError as err:
                lines.append(f"{step.__name__} failed: {err.code}")
    finally:
        backend.close()


def _calls(scenario: str) -> str:
    """The NVML calls, per function, of one backend's session: the cost is behaviour too."""
    import accel.plugins.nvidia._backend as backend_mod
    from accel.plugins.nvidia.testing import FakeNVML

    fake = FakeNVML(scenario)
    lend_s = backend_mod._LEND_S
    # A loan to the next telemetry() lasts _LEND_S of wall time; on a loaded machine the counts
    # would depend on the clock.  Every loan is taken here (tests/nvidia/test_lend covers expiry).
    backend_mod._LEND_S = 3600.0
    lines = [f"$ NVML calls of open, inventory x2, telemetry x2, health, processes, partitions, "
             f"partition_profiles, poll_events, close on {scenario}"]
    try:
        _session(scenario, fake, lines)
    finally:
        backend_mod._LEND_S = lend_s
    lines += [f"{name} {count}" for name, count in sorted(fake.calls.items())]
    return "\n".join(lines) + "\n"


def record(scenario: str) -> str:
    """Everything recorded for one scenario, masked."""
    base = ["--backend", "nvidia", "--option", f"scenario={scenario}", "--option", f"proc_root={PROC_ROOT}"]
    sections = [_cli([*cmd, *base]) for cmd in COMMANDS]
    sections.append(_exposition(scenario))
    sections.append(_calls(scenario))
    return mask("\n".join(sections))


def path_of(scenario: str) -> Path:
    return GOLDEN / f"{scenario}.txt.gz"


def expected(scenario: str) -> str | None:
    """The committed golden output of ``scenario`` (``None``: none recorded)."""
    path = path_of(scenario)
    return gzip.decompress(path.read_bytes()).decode() if path.exists() else None


def write(scenario: str, text: str) -> None:
    # mtime=0: the same text gives the same bytes, so re-recording changes nothing in git.
    path_of(scenario).write_bytes(gzip.compress(text.encode(), mtime=0))


def scenarios() -> list[str]:
    from accel.plugins.nvidia.testing import SCENARIOS

    return sorted(SCENARIOS)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--write", action="store_true", help="write the golden files (else compare)")
    parser.add_argument("scenario", nargs="*", help="only these scenarios")
    args = parser.parse_args(argv)
    GOLDEN.mkdir(exist_ok=True)
    differ = []
    for name in args.scenario or scenarios():
        got = record(name)
        if args.write:
            write(name, got)
        elif expected(name) != got:
            differ.append(name)
    if differ:
        print("differ from the golden outputs:", ", ".join(differ))
        return 1
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
    sys.exit(main())
