"""Dump what every simulated and replayed device source shows, for a before/after diff.

For every simulator profile (``accel sim profiles``), every fake NVML and AMD scenario and every
replay scenario a CLI plugin ships (``plugins/<vendor>/scenarios``) this writes, under ``OUT``:

- ``<source>.ls.json``: ``accel ls --json``;
- ``<source>.show.txt``: ``accel show`` of each listed device (first 8);
- ``<source>.metrics.txt``: one ``/metrics`` scrape of ``accel exporter`` on a loopback port
  (the exporter's own process / platform families and the scrape duration left out).

Times that differ between two runs (ISO timestamps, durations, ``*_seconds`` ages) are replaced
by ``<T>`` so two runs of the same code compare equal.  Use it around a refactoring that must
not change behaviour::

    git stash; python scripts/device_snapshot.py /tmp/before; git stash pop
    python scripts/device_snapshot.py /tmp/after
    python scripts/device_snapshot.py /tmp/after --compare /tmp/before   # exit 0: identical

(or dump ``before`` from a copy of the old tree with its own environment).  Set orders
(``unsupported``) and checkout paths are normalised too.

``--only SUBSTRING`` restricts the sources (``--only sim:``), ``--jobs N`` runs N at a time.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
_ISO = re.compile(r"\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:?\d{2})?")
#: Exposition lines whose value is a time or an age (differs from run to run).
_TIMED = re.compile(r"^(accel_exporter_scrape_duration_seconds|process_|python_|\S*_(timestamp|seconds|age)\S*)")
_AGO = re.compile(r"\b\d+(\.\d+)?\s?(ms|s|sec|seconds|min|minutes|h) ago\b")


def _sources() -> list[tuple[str, list[str]]]:
    """(name, backend-selection arguments) of every source."""
    out: list[tuple[str, list[str]]] = []
    profiles = subprocess.run([sys.executable, "-m", "accel", "sim", "profiles"], capture_output=True, text=True,
                              check=True, cwd=ROOT).stdout.splitlines()[1:]
    for line in profiles:
        if line.strip():
            name = line.split()[0]
            out.append((f"sim:{name}", ["--sim", name]))
    from accel.plugins.amd.testing import SCENARIOS as AMD
    from accel.plugins.nvidia.testing import SCENARIOS as NVIDIA

    out += [(f"nvidia:{s}", ["--backend", "nvidia", "--option", f"scenario={s}"]) for s in sorted(NVIDIA)]
    out += [(f"amd:{s}", ["--backend", "amd", "--option", f"scenario={s}"]) for s in sorted(AMD)]
    for folder in sorted((ROOT / "plugins").glob("*/scenarios")):
        vendor = folder.parent.name
        out += [(f"{vendor}:{s.name}", ["--backend", vendor, "--option", f"scenario={s.name}"])
                for s in sorted(folder.iterdir()) if s.is_dir()]
    return out


#: A path into a checkout (the replay folder a warning names): the checkout's place differs.
_ROOTED = re.compile(r"/\S+?/(plugins|accel|tests)/")


def _normalize(text: str) -> str:
    return _ROOTED.sub(r"<ROOT>/\1/", _AGO.sub("<T> ago", _ISO.sub("<T>", text)))


def _sorted_sets(value: object) -> object:
    """JSON with the sets the model serialises (``unsupported``) sorted: a frozenset's order
    follows string hashing, which differs from process to process."""
    if isinstance(value, dict):
        return {k: (sorted(v) if k == "unsupported" and isinstance(v, list) else _sorted_sets(v))
                for k, v in value.items()}
    if isinstance(value, list):
        return [_sorted_sets(v) for v in value]
    return value


def _normalize_ls(text: str) -> str:
    """An ``ls --json`` dump with its sets sorted (left as it is when its stdout is no JSON)."""
    try:
        head, rest = text.split("--- stdout\n", 1)
        body, tail = rest.split("--- stderr\n", 1)
        data = json.loads(body)
    except ValueError:
        return text
    return f"{head}--- stdout\n{json.dumps(_sorted_sets(data), indent=2)}\n--- stderr\n{tail}"


def compare(before: Path, after: Path) -> int:
    """Print the differences of two dumps (normalised again, so dumps of older versions of this
    script compare too); 0 when identical."""
    import difflib

    names = sorted({p.name for p in before.iterdir()} | {p.name for p in after.iterdir()})
    differ = 0
    for name in names:
        a, b = before / name, after / name
        if not a.exists() or not b.exists():
            print(f"only in {'after' if not a.exists() else 'before'}: {name}")
            differ += 1
            continue
        ta, tb = (_normalize(p.read_text()) for p in (a, b))
        if name.endswith(".ls.json"):
            ta, tb = _normalize_ls(ta), _normalize_ls(tb)
        if ta != tb:
            differ += 1
            sys.stdout.writelines(difflib.unified_diff(ta.splitlines(True), tb.splitlines(True), str(a), str(b)))
    print(f"{len(names)} files, {differ} differ")
    return 1 if differ else 0


def _run(args: Sequence[str]) -> str:
    done = subprocess.run([sys.executable, "-m", "accel", *args], capture_output=True, text=True, cwd=ROOT,
                          timeout=120, env={**os.environ, "COLUMNS": "200"})
    return f"exit {done.returncode}\n--- stdout\n{_normalize(done.stdout)}--- stderr\n{_normalize(done.stderr)}"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _metrics(sel: Sequence[str]) -> str:
    port = _free_port()
    proc = subprocess.Popen([sys.executable, "-m", "accel", "exporter", *sel, "--port", str(port),
                             "--min-interval", "0"], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                _, err = proc.communicate()
                return f"exporter exited {proc.returncode}\n{_normalize(err)}"
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=30) as resp:
                    body = resp.read().decode()
                break
            except OSError:
                time.sleep(0.2)
        else:
            return "exporter did not answer in 60 s\n"
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
    lines = [ln for ln in body.splitlines() if not _TIMED.match(ln) and not _TIMED.match(ln.removeprefix("# HELP ")
                                                                                       .removeprefix("# TYPE "))]
    return _normalize("\n".join(lines)) + "\n"


def _one(out: Path, name: str, sel: list[str], exporter: bool) -> str:
    stem = name.replace(":", "__")
    ls = _normalize_ls(_run(["ls", *sel, "--json"]))
    (out / f"{stem}.ls.json").write_text(ls)
    shows = []
    try:
        listed = json.loads(ls.split("--- stdout\n", 1)[1].split("--- stderr\n", 1)[0])
        devices = listed.get("devices", []) if isinstance(listed, dict) else []
    except (ValueError, IndexError):
        devices = []
    for dev in devices[:8]:
        ident = dev.get("id") if isinstance(dev, dict) else None
        if ident:
            shows.append(f"=== {ident}\n" + _run(["show", *sel, ident]))
    (out / f"{stem}.show.txt").write_text("".join(shows))
    if exporter:
        (out / f"{stem}.metrics.txt").write_text(_metrics(sel))
    return name


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--compare", type=Path, metavar="BEFORE",
                        help="compare dump OUT with the dump BEFORE instead of dumping")
    parser.add_argument("--only", default="", help="only sources whose name contains this")
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--no-exporter", action="store_true", help="skip the /metrics scrapes")
    args = parser.parse_args(argv)
    if args.compare is not None:
        return compare(args.compare, args.out)
    args.out.mkdir(parents=True, exist_ok=True)
    chosen = [(n, s) for n, s in _sources() if args.only in n]
    started = time.monotonic()
    with ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
        for name in pool.map(lambda ns: _one(args.out, ns[0], ns[1], not args.no_exporter), chosen):
            print(name, flush=True)
    print(f"{len(chosen)} sources in {time.monotonic() - started:.0f} s -> {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
