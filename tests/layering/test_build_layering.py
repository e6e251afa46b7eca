"""What the build itself enforces about layering (the tree of TESSERA_BINARY_DIR):

- every library compiles with the include roots of its own folder and of the libraries it links,
  never with src/ whole: no compile command of a file under src/<library>/ names the root of a
  library above it in docs/architecture.md's order, so an include that points up cannot compile;
- clang's -Wthread-safety checks the lock annotations (CI's clang build, scripts/fuzz, fails on a
  violation): a few lines against the head's real headers show a registry call outside the
  cluster lock refused, and the same call under ClusterLock, which names the registry's alias of
  the one mutex, accepted."""
import json
import os
import pathlib
import shutil
import subprocess

import pytest

from test_layering import ROOT, documented_order

BUILD = pathlib.Path(os.environ.get("TESSERA_BINARY_DIR", ROOT / "build"))


def compile_commands():
    path = BUILD / "compile_commands.json"
    if not path.exists():
        pytest.skip(f"no {path}: configure the build first")
    return json.loads(path.read_text())


def test_no_library_compiles_with_the_include_root_of_one_above_it():
    order = documented_order()
    rank = {name: i for i, name in enumerate(order)}
    roots = BUILD / "include_roots"
    problems = []
    checked = 0
    for entry in compile_commands():
        source = pathlib.Path(entry["file"])
        try:
            parts = source.relative_to(ROOT / "src").parts
        except ValueError:
            continue
        library = parts[0]
        if library not in rank or source.name.endswith(("_test.cc", "_fuzzer.cc")):
            continue
        command = entry.get("command") or " ".join(entry["arguments"])
        assert f"-I{ROOT / 'src'} " not in command + " ", f"{source} compiles with src/ whole"
        checked += 1
        for flag in command.split():
            if flag.startswith(f"-I{roots}/"):
                seen = flag[len(f"-I{roots}/"):]
                if seen in rank and rank[seen] < rank[library]:
                    problems.append(f"{source.relative_to(ROOT)} sees {seen}/")
    assert checked > 100, f"only {checked} library sources found in the compile commands"
    assert not problems, "\n".join(sorted(set(problems)))


SNIPPET = """
#include "absl/synchronization/mutex.h"
#include "head/cluster_state.h"
#include "head/node_registry.h"
namespace tessera {
bool Checked(NodeRegistry& nodes, ClusterState& cluster) {
  %s
  return nodes.IsAlive("n1");
}
}  // namespace tessera
"""


def clang_syntax(body, tmp_path):
    clang = shutil.which("clang++")
    if clang is None:
        pytest.skip("clang++ is not installed (scripts/setup installs it)")
    source = tmp_path / "snippet.cc"
    source.write_text(SNIPPET % body)
    flags = ["-std=c++20", "-fsyntax-only", "-Wthread-safety", "-Werror"]
    for root in sorted((BUILD / "include_roots").iterdir()):
        flags.append(f"-I{root}")
    flags += [f"-isystem{BUILD / 'generated'}", f"-I{ROOT / 'include'}"]
    return subprocess.run([clang, *flags, str(source)], capture_output=True, text=True,
                          timeout=120)


def test_a_registry_call_outside_the_cluster_lock_does_not_compile(tmp_path):
    result = clang_syntax("", tmp_path)
    assert result.returncode != 0
    assert "requires holding mutex" in result.stderr, result.stderr


def test_the_lock_taken_under_another_name_is_not_taken_for_the_registrys(tmp_path):
    # The one mutex, locked by a name the analysis cannot tie to the registry's pointer.
    result = clang_syntax("absl::MutexLock lock(&cluster.mu);", tmp_path)
    assert result.returncode != 0
    assert "thread-safety" in result.stderr, result.stderr


def test_the_cluster_lock_naming_the_registrys_alias_compiles(tmp_path):
    result = clang_syntax("ClusterLock lock(&cluster.mu, nodes.mutex());", tmp_path)
    assert result.returncode == 0, result.stderr
