"""Generate the gRPC code of KEDA's external scaler protocol from accel/router/_proto/externalscaler.proto.

    python scripts/gen_keda_protos.py          # rewrite the generated modules
    python scripts/gen_keda_protos.py --check  # exit 1 when they differ from what is committed

Needs ``grpcio-tools`` (a dev dependency).  As scripts/gen_kubelet_protos.py does, protoc's
absolute ``import externalscaler_pb2`` in the ``_pb2_grpc`` module is made relative, the only change
to protoc's output.  tests/router/test_keda.py runs ``--check``.
The generator itself is scripts/_protos.py, shared with the other gen_*_protos script.
"""

from __future__ import annotations

import sys
from pathlib import Path

from _protos import main

ROOT = Path(__file__).resolve().parents[1]
PROTO_DIR = ROOT / "accel" / "router" / "_proto"
PROTOS = ("externalscaler.proto",)

if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:], PROTO_DIR, PROTOS, "scripts/gen_keda_protos.py"))
