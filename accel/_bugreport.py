"""Bug-report bundles: record what the backends ran, so ``accel ls --replay BUNDLE`` replays it.

:class:`~accel.tools.RecordingRunner` without a directory (wraps any runner and keeps every
completed run in memory as a replay recording) and :func:`write_bundle` (writes the recordings, in the
``ReplayRunner`` JSON format, plus ``MANIFEST`` (JSON, but not named ``*.json``: the replayer
loads every ``*.json`` file as a recording) into a directory, atomically: a temporary
sibling directory renamed into place, so a failure leaves no half bundle; size-capped, over the
cap a typed :class:`~accel.errors.ConfigError` and nothing written).  ``accel bugreport --out DIR``
(:func:`accel.cli` ``cmd_bugreport``) wraps every backend's runner in a :class:`RecordingRunner`,
reads the inventory once, and writes the bundle with that inventory as ``INVENTORY``, plus
``sysfs/``: a copy of the sysfs attributes accel reads for each listed device's PCI function
(:func:`collect_sysfs`: identity, class, NUMA node and CPU list, with the ``devices/pci...``
path and the ``physfn`` link that give the PCIe root, bridges and SR-IOV parent) and the NUMA
nodes' ``cpulist`` / ``meminfo``.  ``accel ls --replay BUNDLE`` uses that copy as its sysfs
root.  Not copied: the amdgpu DRM attributes under ``class/drm`` (the AMD backend's own sysfs
reader), and no tarball form (a directory, which ``tar`` packs as it is).

Without hardware, ``accel bugreport --backend ascend -o scenario=910b-8 --out DIR`` records a
shipped replay scenario of a CLI plugin (:func:`scenario_runner`): the flow a user with a
misparsing device follows, end to end, on recorded ``npu-smi`` output (the bundle replays to the
same inventory as the scenario itself).

No environment variables and no hostname are written: only argv, exit status, stdout and
stderr of each run (what the replay needs), and the manifest fields.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import tempfile
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from .errors import ConfigError
from .tools import Recording, RecordingRunner, ReplayRunner, StrPath

__all__ = ["DEFAULT_MAX_BYTES", "RecordingRunner", "SysfsCopy", "collect_sysfs", "scenario_runner", "write_bundle"]

DEFAULT_MAX_BYTES = 64 * 1024 * 1024
"""The default size cap of a bundle (64 MiB of recordings and manifest)."""


#: The attributes of a PCI function :mod:`accel.sysfs` reads (nothing else is copied).
_PCI_FILES = ("vendor", "device", "subsystem_vendor", "subsystem_device", "class", "numa_node", "local_cpulist")
_NODE_FILES = ("cpulist", "meminfo")
_MAX_ATTR_BYTES = 64 * 1024
_BDF = re.compile(r"^[0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]$")
_NODE = re.compile(r"^node[0-9]{1,4}$")


@dataclass
class SysfsCopy:
    """Files (bundle-relative path -> bytes) and symlinks (path -> relative target) of sysfs."""

    files: dict[str, bytes] = field(default_factory=dict)
    links: dict[str, str] = field(default_factory=dict)


def _attr(path: Path) -> bytes | None:
    try:
        if not path.is_file() or path.stat().st_size > _MAX_ATTR_BYTES:
            return None
        return path.read_bytes()[:_MAX_ATTR_BYTES]
    except OSError:
        return None


def _function(root: Path, bus_id: str, out: SysfsCopy, depth: int = 0) -> str | None:
    """Copy one PCI function; its bundle-relative real directory, or ``None`` when absent."""
    link = root / "bus" / "pci" / "devices" / bus_id
    if not _BDF.match(bus_id) or not link.exists():
        return None
    try:
        rel = Path(os.path.realpath(link)).relative_to(Path(os.path.realpath(root)))
    except (OSError, ValueError):
        rel = Path("devices") / bus_id
    if ".." in rel.parts or rel.name != bus_id:
        rel = Path("devices") / bus_id
    for name in _PCI_FILES:
        data = _attr(link / name)
        if data is not None:
            out.files[(rel / name).as_posix()] = data
    out.links[f"bus/pci/devices/{bus_id}"] = os.path.relpath(rel, "bus/pci/devices")
    physfn = link / "physfn"
    if depth == 0 and physfn.exists():
        parent = Path(os.path.realpath(physfn)).name
        parent_rel = _function(root, parent, out, depth + 1)
        if parent_rel is not None:
            out.links[(rel / "physfn").as_posix()] = os.path.relpath(parent_rel, rel)
    return rel.as_posix()


def collect_sysfs(root: Path, bus_ids: Iterable[str]) -> SysfsCopy:
    """The sysfs attributes accel reads for ``bus_ids`` (and the NUMA nodes), under ``root``.

    Only the named attribute files, each at most 64 KiB, and the links that carry topology:
    ``bus/pci/devices/<bdf>`` pointing at its ``devices/pci<domain>:<bus>/.../<bdf>`` path
    (the PCIe root and bridges) and ``physfn`` (a VF's parent).  Unreadable files are skipped.
    """
    out = SysfsCopy()
    for bus_id in sorted(set(bus_ids)):
        _function(root, bus_id, out)
    nodes = root / "devices" / "system" / "node"
    try:
        names = sorted(n for n in os.listdir(nodes) if _NODE.match(n))
    except OSError:
        names = []
    for name in names:
        for attr in _NODE_FILES:
            data = _attr(nodes / name / attr)
            if data is not None:
                out.files[f"devices/system/node/{name}/{attr}"] = data
    return out


def scenario_runner(backend: str, name: str) -> ReplayRunner:
    """A :class:`~accel.tools.ReplayRunner` over ``backend``'s shipped replay scenario ``name``.

    The plugin's entry-point object names its package (``package``, as every CLI plugin built on
    :mod:`accel.toolkit` does); its scenarios are the directories of recordings under
    ``<package>/scenarios/``.  A backend whose scenarios are not tool recordings (``nvidia``'s
    are a fake NVML library, ``sim`` runs nothing), an unknown backend or scenario: a
    :class:`~accel.errors.ConfigError` saying which, with the names that exist.
    """
    from importlib import resources
    from importlib.metadata import entry_points

    from .plugin import ENTRY_POINT_GROUP

    found = [ep for ep in entry_points(group=ENTRY_POINT_GROUP) if ep.name == backend]
    if not found:
        raise ConfigError(f"bugreport: no backend {backend!r} is installed (see `accel plugins`)")
    package = getattr(found[0].load(), "package", None)
    root = Path(str(resources.files(package))) / "scenarios" if isinstance(package, str) else None
    names = []
    if root is not None and root.is_dir():
        names = sorted(p.name for p in root.iterdir() if p.is_dir() and any(p.glob("*.json")))
    if not names:
        raise ConfigError(f"bugreport: backend {backend!r} ships no tool-recording scenarios (its scenario option, if "
                          "any, is a fake library: nothing runs a tool to record); try e.g. "
                          "`accel bugreport --backend ascend -o scenario=910b-8 --out DIR`")
    if name not in names:
        raise ConfigError(f"bugreport: no replay scenario {name!r} of backend {backend!r}; shipped: {', '.join(names)}")
    assert root is not None
    return ReplayRunner(root / name)


def _recording_json(rec: Recording) -> bytes:
    obj = {"argv": list(rec.argv), "stdout": rec.stdout, "stderr": rec.stderr, "returncode": rec.returncode}
    return json.dumps(obj, indent=2, ensure_ascii=False).encode("utf-8")


def write_bundle(
    out: StrPath,
    recordings: Sequence[Recording],
    *,
    version: str,
    backends: Sequence[str],
    max_bytes: int = DEFAULT_MAX_BYTES,
    extra: Mapping[str, bytes] | None = None,
    sysfs: SysfsCopy | None = None,
) -> Path:
    """Write ``recordings`` and ``MANIFEST`` into the new directory ``out``; return its path.

    Raises :class:`~accel.errors.ConfigError` if ``out`` exists or the bundle would exceed
    ``max_bytes``; nothing is left behind on any failure.
    """
    target = Path(out)
    if target.exists():
        raise ConfigError(f"--out: {str(target)!r} already exists")
    files: dict[str, bytes] = {}
    seen: set[tuple[str, ...]] = set()
    for rec in recordings:
        if rec.key in seen:  # a replay answers each argv with one recording
            continue
        seen.add(rec.key)
        files[f"{len(files):04d}-{Path(rec.argv[0]).name}.json"] = _recording_json(rec)
    manifest = {
        "accel_version": version,
        "backends": list(backends),
        "commands": [json.loads(data)["argv"] for data in files.values()],
        "files": {name: len(data) for name, data in files.items()},
        "created_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    for name, data in (extra or {}).items():
        if name.endswith(".json") or "/" in name or name in files or name == "MANIFEST":
            raise ConfigError(f"bug report: extra file name {name!r} is not allowed")
        files[name] = data
    manifest["extra"] = sorted(extra or ())
    tree = sysfs or SysfsCopy()
    manifest["sysfs"] = sorted([*tree.files, *tree.links])
    files["MANIFEST"] = json.dumps(manifest, indent=2).encode("utf-8")
    total = sum(len(d) for d in files.values()) + sum(len(d) for d in tree.files.values())
    if total > max_bytes:
        raise ConfigError(f"bug report would be {total} bytes, over the cap of {max_bytes} (--max-bytes)")
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}.", dir=target.parent))
    try:
        for name, data in files.items():
            (tmp / name).write_bytes(data)
        for rel, data in tree.files.items():
            path = tmp / "sysfs" / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(data)
        for rel, dest in tree.links.items():
            path = tmp / "sysfs" / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            os.symlink(dest, path)
        tmp.rename(target)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return target
