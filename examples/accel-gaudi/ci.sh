#!/usr/bin/env bash
# Install a plugin distribution into a fresh virtual environment and run the conformance kit
# against it, exactly as a vendor would: entry point from installed metadata, no source path.
# The plugin is the folder this script is in (copy it with the template and it checks your
# plugin unchanged), or PLUGIN_DIR; its package and backend id are read from the one
# `accel.backends` entry point in its pyproject.toml.
#
# Offline by design: the fresh venv gets pip from ensurepip, sees the already-installed
# accel-sdk (and pytest, pydantic...) of $PYTHON through a .pth file, and the plugin builds
# with the host's setuptools or its own in-tree backend (pip --no-index --no-build-isolation --no-deps).
#
#   PYTHON=/work/venv/bin/python examples/accel-gaudi/ci.sh [REPORT_DIR]
#   PLUGIN_DIR=path/to/plugin PYTHON=... examples/accel-gaudi/ci.sh [REPORT_DIR]
set -euo pipefail
HERE=$(cd "${PLUGIN_DIR:-$(dirname "$0")}" && pwd)
PY=${PYTHON:-python3}
OUT=${1:-}
# backend id and package, from `[project.entry-points."accel.backends"] <id> = "<package>:PLUGIN"`
read -r BACKEND PACKAGE < <("$PY" - "$HERE/pyproject.toml" <<'PY'
import sys, tomllib
with open(sys.argv[1], "rb") as f:
    eps = tomllib.load(f)["project"]["entry-points"]["accel.backends"]
(name, target), = eps.items()
print(name, target.split(":")[0])
PY
)
export BACKEND PACKAGE
WORK=$(mktemp -d "${TMPDIR:-/tmp}/accel-$BACKEND-ci.XXXXXX")
trap 'rm -rf "$WORK"' EXIT

"$PY" -m venv "$WORK/venv"
VPY="$WORK/venv/bin/python"
HOST_SITE=$("$PY" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
VENV_SITE=$("$VPY" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
# addsitedir (not a bare path line) so the host's own .pth files, e.g. an editable accel-sdk, apply.
echo "import site; site.addsitedir('$HOST_SITE')" > "$VENV_SITE/_accel_host_site.pth"

# The venv's own old setuptools (from ensurepip) would shadow the host's, which builds wheels.
"$VPY" -m pip uninstall --quiet --yes setuptools
# Built from a copy, so setuptools' build/ and egg-info never land in the source tree.
cp -r "$HERE" "$WORK/src"
rm -rf "$WORK/src/build" "$WORK/src/"*.egg-info
"$VPY" -m pip install --quiet --no-index --no-build-isolation --no-deps "$WORK/src"
cd "$WORK"   # never import the plugin from its source folder
"$VPY" - <<'PY'
import importlib, importlib.metadata as md, os
backend, package = os.environ["BACKEND"], os.environ["PACKAGE"]
plugin = importlib.import_module(package)
assert "site-packages" in plugin.__file__, plugin.__file__
eps = {ep.name: ep.value for ep in md.entry_points(group="accel.backends")}
assert eps.get(backend) == f"{package}:PLUGIN", eps
print("installed:", plugin.__file__)
PY
# 1. the plugin's own tests (the three-line suite, the oracle scenarios, the parser)
"$VPY" -m pytest -q -p no:cacheprovider "$WORK/src/tests" --rootdir "$WORK" -c /dev/null -rs
# 2. the kit run by name, every shipped scenario, in certify mode, with the bundle
REPORT=${OUT:-$WORK/report}
"$VPY" -m pytest -q -p no:cacheprovider --rootdir "$WORK" -c /dev/null -rs \
    --accel-backend "$BACKEND" --accel-certify --accel-report "$REPORT"
test -s "$REPORT/matrix.html" && test -s "$REPORT/PRODUCT.json"
echo "$BACKEND plugin: installed out of tree and certified; report in $REPORT"
