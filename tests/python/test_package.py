"""The package as a user meets it: it imports, its stubs name exactly what the extension has,
`python3 -m tessera` is the CLI, and the Ray names a ported program uses exist."""
import ast
import os
import sys
from pathlib import Path

import tessera
from tessera import _core

from conftest import run


def test_the_stub_names_exactly_the_extension():
    stub = Path(tessera.__file__).with_name("_core.pyi")
    assert stub.exists(), f"{stub} is missing (the build copies python/tessera/_core.pyi)"
    tree = ast.parse(stub.read_text())
    names = set()
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, ast.AnnAssign):
            names.add(node.target.id)
    actual = {n for n in dir(_core) if not (n.startswith("__") and n.endswith("__"))}
    assert names == actual, (f"only in the stub: {sorted(names - actual)}; "
                             f"only in the module: {sorted(actual - names)}")
    assert (Path(tessera.__file__).parent / "py.typed").exists()


def test_python_dash_m_tessera_is_the_cli(tessera_bin):
    env = dict(os.environ, TESSERA_BIN=str(tessera_bin))
    result = run([sys.executable, "-m", "tessera", "--help"], timeout=30, env=env)
    assert result.returncode == 0, result.stderr
    assert "accelerator-native distributed runtime" in result.stdout


def test_the_ray_names_a_ported_program_uses_exist():
    for name in ["init", "shutdown", "is_initialized", "remote", "get", "put", "wait", "kill",
                 "get_actor", "method", "get_runtime_context", "get_gpu_ids", "ObjectRef"]:
        assert hasattr(tessera, name), name
    from tessera.exceptions import (ActorDiedError, GetTimeoutError, RayActorError,  # noqa: F401
                                    RayTaskError, TaskCancelledError, WorkerCrashedError)
    from tessera.util.scheduling_strategies import (  # noqa: F401
        NodeAffinitySchedulingStrategy, PlacementGroupSchedulingStrategy)


def test_importing_the_package_starts_nothing():
    script = "import tessera, threading; print(threading.active_count(), tessera.is_initialized())"
    result = run([sys.executable, "-c", script], timeout=30,
                 env=dict(os.environ, PYTHONPATH=str(Path(tessera.__file__).parent.parent)))
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["1", "False"]
