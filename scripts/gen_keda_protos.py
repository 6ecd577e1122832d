"""Generate the gRPC code of KEDA's external scaler protocol from accel/router/_proto/externalscaler.proto.

    python scripts/gen_keda_protos.py          # rewrite the generated modules
    python scripts/gen_keda_protos.py --check  # exit 1 when they differ from what is committed

Needs ``grpcio-tools`` (a dev dependency).  As scripts/gen_kubelet_protos.py does, protoc's
absolute ``import externalscaler_pb2`` in the ``_pb2_grpc`` module is made relative, the only change
to protoc's output.  tests/router/test_keda.py runs ``--check``.
"""

from __future__ import annotations

import re
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PROTO_DIR = ROOT / "accel" / "router" / "_proto"
PROTOS = ("externalscaler.proto",)


def generate(out: Path) -> dict[str, str]:
    """Run protoc (grpc_tools) on every proto into ``out``; return {file name: text}."""
    from grpc_tools import protoc  # type: ignore[import-untyped]

    for name in PROTOS:
        argv = ["grpc_tools.protoc", f"-I{PROTO_DIR}", f"--python_out={out}", f"--pyi_out={out}",
                f"--grpc_python_out={out}", name]
        if protoc.main(argv) != 0:
            raise SystemExit(f"protoc failed on {name}")
    texts: dict[str, str] = {}
    stems = [Path(p).stem for p in PROTOS]
    for path in sorted(out.iterdir()):
        text = path.read_text(encoding="utf-8")
        for stem in stems:
            text = re.sub(rf"^import {stem}_pb2 as ", f"from . import {stem}_pb2 as ", text, flags=re.M)
        texts[path.name] = text
    return texts


def main(argv: list[str]) -> int:
    check = "--check" in argv
    with tempfile.TemporaryDirectory(prefix="accel-protos-") as tmp:
        texts = generate(Path(tmp))
    if check:
        differ = [name for name, text in texts.items()
                  if not (PROTO_DIR / name).exists() or (PROTO_DIR / name).read_text(encoding="utf-8") != text]
        for name in differ:
            print(f"out of date: {PROTO_DIR / name} (run scripts/gen_keda_protos.py)", file=sys.stderr)
        return 1 if differ else 0
    for name, text in texts.items():
        (PROTO_DIR / name).write_text(text, encoding="utf-8")
        print(PROTO_DIR / name)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
