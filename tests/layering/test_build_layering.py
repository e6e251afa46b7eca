"""What the build itself enforces about layering (the tree of TESSERA_BINARY_DIR):

- every library compiles with the include roots of its own folder and of the libraries it links,
  never with src/ whole: no compile command of a file under src/<library>/ names the root of a
  library above it in docs/architecture.md's order, so an include that points up cannot compile;
- clang's -Wthread-safety checks the lock annotations (CI's clang build, scripts/fuzz, fails on a
  violation): a few lines against the head's real headers show that the cluster's nodes are
  reached only through the ClusterController with its one mutex held, under that one name."""
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
#include "head/cluster_controller.h"
namespace tessera {
bool Checked(ClusterController& controller) {
  %s
  return controller.nodes().IsAlive("n1");
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


def test_the_nodes_outside_the_controllers_lock_do_not_compile(tmp_path):
    result = clang_syntax("", tmp_path)
    assert result.returncode != 0
    assert "requires holding mutex" in result.stderr, result.stderr


def test_a_lock_released_before_the_call_does_not_count(tmp_path):
    result = clang_syntax("{ absl::MutexLock lock(controller.mutex()); }", tmp_path)
    assert result.returncode != 0
    assert "thread-safety" in result.stderr, result.stderr


def test_the_nodes_under_the_controllers_one_mutex_compile(tmp_path):
    result = clang_syntax("absl::MutexLock lock(controller.mutex());", tmp_path)
    assert result.returncode == 0, result.stderr
