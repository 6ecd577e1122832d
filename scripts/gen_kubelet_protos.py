"""Generate the gRPC code of the kubelet APIs accel speaks (DRA, plugin registration and
PodResources) from the .proto files in accel/integrations/k8s/_proto.

    python scripts/gen_kubelet_protos.py          # rewrite the generated modules
    python scripts/gen_kubelet_protos.py --check  # exit 1 when they differ from what is committed

Needs ``grpcio-tools`` (a dev dependency).  protoc writes absolute imports
(``import dra_v1_pb2``) into the ``_pb2_grpc`` modules; they are made relative here, the only
change to protoc's output, so the modules load from inside the ``accel`` package.
tests/k8s_kubelet/test_generated.py runs ``--check``, so the code can never drift from the protos.
The generator itself is scripts/_protos.py, shared with the other gen_*_protos script.
"""

from __future__ import annotations

import sys
from pathlib import Path

from _protos import main

ROOT = Path(__file__).resolve().parents[1]
PROTO_DIR = ROOT / "accel" / "integrations" / "k8s" / "_proto"
PROTOS = ("dra_v1.proto", "dra_v1beta1.proto", "pluginregistration_v1.proto", "podresources_v1.proto")

if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:], PROTO_DIR, PROTOS, "scripts/gen_kubelet_protos.py"))
