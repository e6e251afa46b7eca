#!/usr/bin/env bash
# The demo's build target (tessera_runtime, cmake/install.cmake) names exactly what
# `cmake --install` installs that is built (the programs, libtessera, the Python package with its
# _core extension), and nothing the tests or benchmarks need: scripts/run-demo builds only it
# before it installs and runs.
#   runtime_target_test.sh BUILD_DIR
set -euo pipefail
build=$1
inputs=$(ninja -C "$build" -t query tessera_runtime | sed -n '/input:/,/outputs:/p')
fail=0
for want in bin/tessera bin/tessera-launcher lib/libtessera.so python/tessera/_core \
    tessera_python_package; do
  if ! grep -q "$want" <<<"$inputs"; then
    echo "tessera_runtime does not build $want" >&2
    fail=1
  fi
done
if grep -E '_test$|_fuzzer$|_bench$|/bench/' <<<"$inputs" >&2; then
  echo "tessera_runtime builds the above, which nothing installed needs" >&2
  fail=1
fi
[ "$fail" -eq 0 ] && echo "tessera_runtime: $(grep -c '^    ' <<<"$inputs") targets, all installed ones"
exit "$fail"
