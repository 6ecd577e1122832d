#!/usr/bin/env bash
# The benchmarks' small, fast profiles (CI runs this after the tests; tox -e bench-smoke too).
# Every benchmark prints ratios against a baseline measured in the same run.  Outputs go to
# build/bench so the committed full-run results under benchmarks/*/results stay as they are.
set -euo pipefail
cd "$(dirname "$0")/.."
PY="${PYTHON:-python3}"
OUT="${ACCEL_BENCH_OUT:-build/bench}"
mkdir -p "$OUT"
echo "== bench: import time";            "$PY" benchmarks/import_time.py --runs 7
echo "== bench: pytest plugin cost (a project that does not use the kit)"; "$PY" benchmarks/pytest_plugin_cost.py --runs 5
echo "== bench: NVML calls per snapshot"; "$PY" benchmarks/nvml_calls/run.py
echo "== bench: scheduler speed (quick)"; "$PY" benchmarks/scheduler_speed/bench_speed.py --quick
echo "== bench: openb (quick)";           "$PY" benchmarks/openb/run_openb.py --quick --out "$OUT/openb"
echo "== bench: MIG carving on demand vs the best static layout (quick)"; "$PY" benchmarks/partitions/carving.py --quick --out "$OUT/partitions"
echo "== bench: philly (quick)";          "$PY" benchmarks/philly/run_philly.py --quick --out "$OUT/philly"
echo "== bench: parse time per byte (quick)"; "$PY" benchmarks/parse_scaling/run.py --quick
echo "== bench: memory-leak detection (quick)"; "$PY" benchmarks/leak/run.py --quick
echo "== bench: exporter scrape vs nvitop-exporter (quick; skips without it)"; "$PY" benchmarks/exporter_scrape/run.py --scrapes 5 --warmup 1
echo "== bench: exporter --labels dcgm vs accel (quick)"; "$PY" benchmarks/exporter_scrape/labels.py --scrapes 5 --warmup 1
echo "== bench: k8s scheduler extender (quick)"; "$PY" benchmarks/extender/run.py --quick
echo "== bench: HTTP services under load: extender and exporter vs the stdlib server (quick)"; "$PY" benchmarks/service_load/run.py --quick --idle 100
echo "== bench: serving routing on the Mooncake trace (quick)"; "$PY" benchmarks/serving/routing.py --quick --out "$OUT/serving"
echo "== bench: serving autoscaling on the Azure trace (quick)"; "$PY" benchmarks/serving/autoscale.py --quick --out "$OUT/serving"
echo "== bench: serving + training co-location (quick)"; "$PY" benchmarks/serving/colocate.py --quick --out "$OUT/serving"
echo "== bench: accel serve API latency vs /healthz (quick)"; "$PY" benchmarks/service/bench_api.py --quick
