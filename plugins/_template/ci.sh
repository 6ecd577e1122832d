#!/usr/bin/env bash
# Install the template plugin into a fresh virtual environment and run the conformance kit
# against it, exactly as a vendor would: entry point from installed metadata, no source path.
#
# Offline by design: the fresh venv gets pip from ensurepip, sees the already-installed
# accel-sdk (and pytest, pydantic...) of $PYTHON through a .pth file, and the template builds
# with its in-tree backend (pip --no-index --no-build-isolation --no-deps).
#
#   PYTHON=/work/venv/bin/python plugins/_template/ci.sh [REPORT_DIR]
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
PY=${PYTHON:-python3}
OUT=${1:-}
WORK=$(mktemp -d "${TMPDIR:-/tmp}/accel-template-ci.XXXXXX")
trap 'rm -rf "$WORK"' EXIT

"$PY" -m venv "$WORK/venv"
VPY="$WORK/venv/bin/python"
HOST_SITE=$("$PY" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
VENV_SITE=$("$VPY" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
# addsitedir (not a bare path line) so the host's own .pth files, e.g. an editable accel-sdk, apply.
echo "import site; site.addsitedir('$HOST_SITE')" > "$VENV_SITE/_accel_host_site.pth"

"$VPY" -m pip install --quiet --no-index --no-build-isolation --no-deps "$HERE"
cd "$WORK"   # never import the plugin from its source folder
"$VPY" - <<'PY'
import accel_backend_example, importlib.metadata as md
assert "site-packages" in accel_backend_example.__file__, accel_backend_example.__file__
eps = {ep.name: ep.value for ep in md.entry_points(group="accel.backends")}
assert eps.get("example") == "accel_backend_example:PLUGIN", eps
print("installed:", accel_backend_example.__file__)
PY
# 1. the vendor's own test modules (the three-line suite and the certified scenario)
"$VPY" -m pytest -q -p no:cacheprovider "$HERE/tests" --rootdir "$WORK" -c /dev/null
# 2. the kit run by name, every shipped scenario, in certify mode, with the bundle
REPORT=${OUT:-$WORK/report}
"$VPY" -m pytest -q -p no:cacheprovider --rootdir "$WORK" -c /dev/null \
    --accel-backend example --accel-certify --accel-report "$REPORT"
test -s "$REPORT/matrix.html" && test -s "$REPORT/PRODUCT.json"
echo "template plugin: installed out of tree and certified; report in $REPORT"
