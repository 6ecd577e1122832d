#!/usr/bin/env bash
# The project's test command (README "Run the tests"; .ci/run calls it).
# Installs accel with everything the tests need into the active Python environment, then runs
# lint, the type check and the whole test suite.  Fast profile: well under 20 minutes on 2 cores.
set -euo pipefail
cd "$(dirname "$0")/.."
PY="${PYTHON:-python3}"

echo "== install: $PY -m pip install -e '.[dev]'"
"$PY" -m pip install -q --disable-pip-version-check -e '.[dev]'

echo "== lint: ruff"
"$PY" -m ruff check .

echo "== type: mypy --strict over accel, accel.plugins, accel.conformance, accel.scheduler"
"$PY" scripts/typecheck.py

echo "== tests: pytest, workers: ${ACCEL_TEST_WORKERS:-auto (one per core)} (ACCEL_TEST_WORKERS=0: one process)"
"$PY" -m pytest -n "${ACCEL_TEST_WORKERS:-auto}" --dist loadfile "$@"

echo "== conformance matrix: every in-tree backend on its shipped scenarios (as committed in docs/conformance/)"
"$PY" -m accel.conformance.matrix --all --out "${ACCEL_CONFORMANCE_OUT:-build/conformance}"
