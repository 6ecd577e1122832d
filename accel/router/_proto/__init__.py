"""Generated gRPC code of KEDA's external scaler protocol (do not edit).

``externalscaler.proto`` beside it says which upstream file and commit it follows;
``scripts/gen_keda_protos.py`` regenerates the ``_pb2`` modules, and tests/router/test_keda.py fails
when they differ from what the proto gives.
"""
