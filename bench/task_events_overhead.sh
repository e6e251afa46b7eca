#!/usr/bin/env bash
# The cost of timelines on the task hot path: BM_TaskAsync/10000 (10,000 no-op tasks submitted,
# then waited for) with the driver's task-run reports on and off, interleaved for ROUNDS rounds
# (default 8) against one local cluster, so both see the same machine. Prints each round's
# tasks/s and the median ratio off/on (above 1: reporting costs that much).
#   bench/task_events_overhead.sh [ROUNDS]     (after: ninja -C build tessera task_bench)
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-8}
state=$(mktemp -d /tmp/tessera-bench-XXXXXX)
trap 'build/bin/tessera down --state-dir "$state" >/dev/null 2>&1 || true; rm -rf "$state"' EXIT
build/bin/tessera up examples/clusters/small.yaml --state-dir "$state" --object-store-memory 256MiB >/dev/null
export TESSERA_STATE_DIR=$state
rate() {  # tasks/s of one run
  TESSERA_BENCH_TASK_EVENTS=$1 build/bench/task_bench --benchmark_filter='BM_TaskAsync/10000' \
    --benchmark_format=json 2>/dev/null |
    python3 -c 'import json,sys; b=json.load(sys.stdin)["benchmarks"][0]; print(b["items_per_second"])'
}
rate 1 >/dev/null  # warm up: workers leased, caches filled
on=(); off=()
for ((i = 0; i < rounds; i++)); do
  on+=("$(rate 1)")
  off+=("$(rate 0)")
  echo "round $((i + 1)): on ${on[-1]} tasks/s, off ${off[-1]} tasks/s"
done
python3 - "${on[*]}" "${off[*]}" <<'PY'
import statistics, sys
on = [float(x) for x in sys.argv[1].split()]
off = [float(x) for x in sys.argv[2].split()]
ratios = [b / a for a, b in zip(on, off)]
print(f"median on {statistics.median(on):.0f} tasks/s, off {statistics.median(off):.0f} tasks/s, "
      f"median ratio off/on {statistics.median(ratios):.3f} over {len(ratios)} rounds")
PY
