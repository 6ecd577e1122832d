"""The one generator behind scripts/gen_kubelet_protos.py and scripts/gen_keda_protos.py.

protoc (``grpc_tools``) is run on each ``.proto`` of a folder; the only change made to its output
is that the absolute ``import x_pb2 as`` in the ``_pb2_grpc`` modules becomes relative, so the
modules load from inside the ``accel`` package.  ``--check`` exits 1 when the committed modules
differ from what protoc makes now (tests run it, so the code can never drift from the protos).
"""

from __future__ import annotations

import re
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path


def generate(proto_dir: Path, protos: Sequence[str], out: Path) -> dict[str, str]:
    """Run protoc on every proto into ``out``; return {file name: text}."""
    from grpc_tools import protoc  # type: ignore[import-untyped]

    for name in protos:
        argv = ["grpc_tools.protoc", f"-I{proto_dir}", f"--python_out={out}", f"--pyi_out={out}",
                f"--grpc_python_out={out}", name]
        if protoc.main(argv) != 0:
            raise SystemExit(f"protoc failed on {name}")
    texts: dict[str, str] = {}
    stems = [Path(p).stem for p in protos]
    for path in sorted(out.iterdir()):
        text = path.read_text(encoding="utf-8")
        for stem in stems:
            text = re.sub(rf"^import {stem}_pb2 as ", f"from . import {stem}_pb2 as ", text, flags=re.M)
        texts[path.name] = text
    return texts


def main(argv: list[str], proto_dir: Path, protos: Sequence[str], script: str) -> int:
    """Rewrite the generated modules, or with ``--check`` report the ones out of date."""
    check = "--check" in argv
    with tempfile.TemporaryDirectory(prefix="accel-protos-") as tmp:
        texts = generate(proto_dir, protos, Path(tmp))
    if check:
        differ = [name for name, text in texts.items()
                  if not (proto_dir / name).exists() or (proto_dir / name).read_text(encoding="utf-8") != text]
        for name in differ:
            print(f"out of date: {proto_dir / name} (run {script})", file=sys.stderr)
        return 1 if differ else 0
    for name, text in texts.items():
        (proto_dir / name).write_text(text, encoding="utf-8")
        print(proto_dir / name)
    return 0
