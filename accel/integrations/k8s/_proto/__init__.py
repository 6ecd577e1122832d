"""Generated gRPC code of the kubelet's DRA, plugin-registration and PodResources APIs (do not edit).

The ``.proto`` files beside it say which upstream file and commit each one follows;
``scripts/gen_kubelet_protos.py`` regenerates the ``_pb2`` modules, and
tests/k8s_kubelet/test_generated.py fails when they differ from what the protos give.
"""
