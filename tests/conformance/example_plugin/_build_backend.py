"""A tiny PEP 517 backend for the example plugin (pure wheel, stdlib only, works offline).

It packs ``accel_backend_example/`` (code, scenarios) and writes the dist-info from
``pyproject.toml``: name, version, dependencies and entry points.  Replace it with setuptools
or hatchling in a real plugin; nothing else in the plugin depends on it.
"""

from __future__ import annotations

import base64
import hashlib
import tomllib
import zipfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
PACKAGE = "accel_backend_example"


def _project() -> dict:  # type: ignore[type-arg]
    return tomllib.loads((HERE / "pyproject.toml").read_text(encoding="utf-8"))["project"]


def _metadata(p: dict) -> str:  # type: ignore[type-arg]
    lines = ["Metadata-Version: 2.1", f"Name: {p['name']}", f"Version: {p['version']}",
             f"Summary: {p.get('description', '')}", f"Requires-Python: {p.get('requires-python', '')}"]
    lines += [f"Requires-Dist: {d}" for d in p.get("dependencies", [])]
    return "\n".join(lines) + "\n"


def _entry_points(p: dict) -> str:  # type: ignore[type-arg]
    out = []
    for group, eps in p.get("entry-points", {}).items():
        out.append(f"[{group}]")
        out += [f"{k} = {v}" for k, v in eps.items()]
        out.append("")
    return "\n".join(out)


def _digest(data: bytes) -> str:
    return "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


def get_requires_for_build_wheel(config_settings: object = None) -> list[str]:
    return []


def get_requires_for_build_editable(config_settings: object = None) -> list[str]:
    return []


def _build(wheel_directory: str, files: dict[str, bytes]) -> str:
    p = _project()
    dist = f"{p['name'].replace('-', '_')}-{p['version']}"
    info = f"{dist}.dist-info"
    files[f"{info}/METADATA"] = _metadata(p).encode()
    files[f"{info}/WHEEL"] = (b"Wheel-Version: 1.0\nGenerator: _build_backend\nRoot-Is-Purelib: true\n"
                              b"Tag: py3-none-any\n")
    files[f"{info}/entry_points.txt"] = _entry_points(p).encode()
    record = [f"{name},{_digest(data)},{len(data)}" for name, data in files.items()] + [f"{info}/RECORD,,"]
    files[f"{info}/RECORD"] = ("\n".join(record) + "\n").encode()
    name = f"{dist}-py3-none-any.whl"
    with zipfile.ZipFile(Path(wheel_directory) / name, "w", zipfile.ZIP_DEFLATED) as zf:
        for path, data in files.items():
            zf.writestr(path, data)
    return name


def build_wheel(wheel_directory: str, config_settings: object = None, metadata_directory: object = None) -> str:
    files = {}
    for path in sorted((HERE / PACKAGE).rglob("*")):
        if path.is_file() and "__pycache__" not in path.parts:
            files[path.relative_to(HERE).as_posix()] = path.read_bytes()
    return _build(wheel_directory, files)


def build_editable(wheel_directory: str, config_settings: object = None, metadata_directory: object = None) -> str:
    return _build(wheel_directory, {f"__editable__.{PACKAGE}.pth": f"{HERE}\n".encode()})
