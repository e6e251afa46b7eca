#!/usr/bin/env bash
# Runs Tessera's microbenchmark loops, the same loops on Dask distributed, and the machine's
# ceilings in one run, and prints the table of docs/benchmarks.md ("C++ API against Dask").
#
#   bench/peers/compare_with_dask.sh [BUILD_DIR] [--quick]
#
# BUILD_DIR (default build) must hold bin/tessera and the benchmarks (ninja task_bench
# object_store_bench object_transfer_bench machine_ceilings_bench tessera). A local cluster of
# examples/clusters/small.yaml is brought up in a temp folder for the task and actor loops and
# brought down after. JSON of every part is kept in $OUT (default a temp folder, printed).
set -euo pipefail
cd "$(dirname "$0")/../.."
build=${1:-build}
quick=${2:-}
out=${OUT:-$(mktemp -d /tmp/tessera-compare.XXXXXX)}
min_time=1
[ "$quick" = "--quick" ] && min_time=0.3
echo "compare: results in $out" >&2

gbench() {  # gbench NAME BINARY [ARGS...]: runs a Google Benchmark binary into $out/NAME.json
  local name=$1
  shift
  "$@" --benchmark_out="$out/$name.json" --benchmark_out_format=json >/dev/null 2>"$out/$name.err"
}

gbench ceilings "$build/bench/machine_ceilings_bench" --benchmark_min_time=$min_time
gbench store "$build/bench/object_store_bench" --benchmark_filter='LargePut|SmallPutGet'
gbench transfer "$build/bench/object_transfer_bench" --benchmark_min_time=$min_time

state=$(mktemp -d /tmp/tessera-compare-cluster.XXXXXX)
export TESSERA_STATE_DIR=$state
trap '"$build/bin/tessera" down --state-dir "$state" >/dev/null 2>&1 || true; rm -rf "$state"' EXIT
"$build/bin/tessera" up examples/clusters/small.yaml --state-dir "$state" >/dev/null
gbench tasks "$build/bench/task_bench" --benchmark_min_time=$min_time
"$build/bin/tessera" down --state-dir "$state" >/dev/null

/usr/bin/python3 bench/peers/dask_loops.py ${quick:+--quick} --json "$out/dask.json" \
  >"$out/dask.txt" 2>"$out/dask.err"

/usr/bin/python3 bench/peers/make_table.py "$out"
