#!/usr/bin/env bash
# Packaging end to end (ctest Packaging.install): `cmake --install` into a throw-away prefix,
# examples/consumer built against it twice (find_package with Ninja, and one g++ line with
# pkg-config), both run on a local cluster brought up with the installed CLI beside a task from
# the installed Python package, and that package imported with its CLI found. Everything it made
# is removed, whatever happens.
#
#   tests/packaging/install_test.sh BUILD_DIR SOURCE_DIR CXX PYTHON_DIR [CHECK_SYS_PATH]
#
# PYTHON_DIR is TESSERA_PYTHON_INSTALL_DIR (relative to the prefix); CHECK_SYS_PATH=1 also checks
# that /usr/local/PYTHON_DIR is on /usr/bin/python3's sys.path (true of the default).
#
# The prefix lies at a fixed path in the build tree (BUILD_DIR/packaging-test) so that ccache,
# used when present, sees the same compile lines each run. Cost: two compiles of main.cc (seconds
# with ccache) and a three-node cluster with 32 MiB object stores.
set -euo pipefail
build=$(cd "$1" && pwd)
source=$(cd "$2" && pwd)
cxx=${3:-c++}
python_dir=${4:?usage: install_test.sh BUILD_DIR SOURCE_DIR CXX PYTHON_DIR [CHECK_SYS_PATH]}
check_sys_path=${5:-0}

work=$build/packaging-test
prefix=$work/prefix
state=$(mktemp -d /tmp/tpk.XXXXXX)  # short: the cluster's unix sockets live here
cleanup() {
  if [ -x "$prefix/bin/tessera" ]; then
    "$prefix/bin/tessera" down --state-dir "$state" >/dev/null 2>&1 || true
  fi
  rm -rf "$state" "$work"
}
trap cleanup EXIT
trap 'exit 1' INT TERM HUP  # ctest's timeout: clean up on the way out too
rm -rf "$work"
mkdir -p "$work"

step() { echo "== $*"; }
fail() { echo "install_test: $*" >&2; exit 1; }

step "cmake --install $build --prefix $prefix"
cmake --install "$build" --prefix "$prefix" >"$work/install.log" || {
  cat "$work/install.log" >&2
  fail "cmake --install failed"
}
for f in bin/tessera bin/tessera-launcher include/tessera/tessera.h include/tessera/gang.h \
         include/tessera/placement_group.h include/tessera/core/vocabulary/task_options.h \
         include/tessera/core/vocabulary/placement_strategy.h \
         include/tessera/core/vocabulary/slice_shape.h \
         include/tessera/core/vocabulary/ids.h include/tessera/core/vocabulary/gang_state.h \
         include/tessera/core/base/strong_id.h \
         include/tessera/core/resources/resource_set.h lib/libtessera.so lib/libtessera.so.0 \
         lib/cmake/Tessera/TesseraConfig.cmake lib/cmake/Tessera/TesseraConfigVersion.cmake \
         lib/cmake/Tessera/TesseraTargets.cmake lib/pkgconfig/tessera.pc \
         "$python_dir/tessera/__init__.py" "$python_dir/tessera/py.typed" \
         "$python_dir/tessera/_core.pyi"; do
  [ -e "$prefix/$f" ] || fail "not installed: $f"
done
ls "$prefix/$python_dir"/tessera/_core*.so >/dev/null || fail "not installed: _core*.so"
readelf -d "$prefix/lib/libtessera.so" | grep -q 'SONAME.*\[libtessera\.so\.0\]' ||
  fail "libtessera.so has no SONAME libtessera.so.0"
# The extension links the static libraries: loading libtessera.so too would register the
# protos twice.
if readelf -d "$prefix/$python_dir"/tessera/_core*.so | grep -q libtessera; then
  fail "the Python extension needs libtessera.so"
fi

launcher=()
if command -v ccache >/dev/null; then launcher=(ccache); fi

step "examples/consumer with find_package(Tessera) (Ninja)"
cmake -S "$source/examples/consumer" -B "$work/consumer" -G Ninja \
  -DCMAKE_PREFIX_PATH="$prefix" -DCMAKE_CXX_COMPILER="$cxx" \
  ${launcher:+-DCMAKE_CXX_COMPILER_LAUNCHER=${launcher[0]}} >"$work/configure.log" || {
  cat "$work/configure.log" >&2
  fail "configuring examples/consumer against $prefix failed"
}
cmake --build "$work/consumer" || fail "building examples/consumer failed"

step "examples/consumer with pkg-config"
export PKG_CONFIG_PATH=$prefix/lib/pkgconfig
libdir=$(pkg-config --variable=libdir tessera)
# shellcheck disable=SC2046  # pkg-config's flags are meant to be split
"${launcher[@]}" "$cxx" -o "$work/consumer-pc" "$source/examples/consumer/main.cc" \
  $(pkg-config --cflags --libs tessera) -Wl,-rpath,"$libdir" ||
  fail "g++ main.cc \$(pkg-config --cflags --libs tessera) failed"

# Users link Tessera and what its headers include, never gRPC or protobuf themselves.
for program in "$work/consumer/consumer" "$work/consumer-pc"; do
  needed=$(readelf -d "$program" | grep NEEDED)
  grep -q libtessera.so.0 <<<"$needed" || fail "$program does not need libtessera.so.0"
  if grep -q -E 'libgrpc|libprotobuf' <<<"$needed"; then
    fail "$program links gRPC or protobuf directly: $needed"
  fi
done

step "both on a cluster from the installed CLI"
"$prefix/bin/tessera" up "$source/examples/clusters/small.yaml" --state-dir "$state" \
  --object-store-memory 32MiB >/dev/null || fail "tessera up failed"
export TESSERA_STATE_DIR=$state
for program in "$work/consumer/consumer" "$work/consumer-pc"; do
  output=$(cd "$work" && timeout 120 "$program") || fail "$program failed: $output"
  echo "$output"
  grep -q 'Square(7) = 49' <<<"$output" || fail "$program: no task result"
done
site=$prefix/$python_dir
# A task from the installed Python package (its workers import the same package).
output=$(cd "$work" && PYTHONPATH=$site timeout 120 /usr/bin/python3 -c '
import tessera
tessera.init()
@tessera.remote
def square(x):
    return x * x
print("python task: square(7) =", tessera.get(square.remote(7)))
tessera.shutdown()
') || fail "a Python task on the installed package failed: $output"
echo "$output"
grep -q 'square(7) = 49' <<<"$output" || fail "no Python task result"
"$prefix/bin/tessera" down --state-dir "$state" >/dev/null || fail "tessera down failed"

step "the installed Python package: import and CLI"
if [ "$check_sys_path" = 1 ]; then
  # site.getsitepackages: the folders site.py puts on sys.path once they exist.
  /usr/bin/python3 -c 'import site, sys; sys.exit(sys.argv[1] not in site.getsitepackages())' \
    "/usr/local/$python_dir" || fail "/usr/local/$python_dir is not on python3's sys.path"
fi
(
  cd "$work"  # away from the source tree, whose python/ is not on the path anyway
  export PYTHONPATH=$site
  unset TESSERA_BIN
  where=$(/usr/bin/python3 -c 'import tessera, os; print(os.path.dirname(tessera.__file__))')
  [ "$where" = "$site/tessera" ] || fail "import tessera found $where, not $site/tessera"
  cli=$(/usr/bin/python3 -c 'from tessera._private.binary import tessera_bin; print(tessera_bin())')
  [ "$cli" = "$prefix/bin/tessera" ] ||
    fail "the package finds the CLI at $cli, not $prefix/bin/tessera"
  /usr/bin/python3 -m tessera --help >/dev/null || fail "python3 -m tessera --help failed"
)
echo "install_test: OK"
