"""tessera.init's choice of cluster: a local one-node cluster started (and stopped at shutdown)
when there is none, "auto" failing clearly, a second init refused, and the context manager."""
import os
import textwrap
from pathlib import Path

from conftest import run
import sys


def python(script, env, timeout=150):
    return run([sys.executable, "-c", textwrap.dedent(script)], timeout=timeout, env=env)


def isolated_env(tmp_path, tessera_bin):
    import tessera
    env = {k: v for k, v in os.environ.items()
           if k not in ("TESSERA_ADDRESS", "RAY_ADDRESS", "TESSERA_STATE_DIR")}
    env["TESSERA_STATE_DIR"] = str(tmp_path / "no-cluster-here")
    env["TESSERA_BIN"] = str(tessera_bin)
    env["PYTHONPATH"] = str(Path(tessera.__file__).resolve().parent.parent)
    env["TESSERA_OBJECT_STORE_MEMORY"] = str(64 << 20)  # tests keep shared memory small
    return env


def test_init_without_a_cluster_starts_a_local_one_and_shutdown_stops_it(tmp_path, tessera_bin):
    result = python("""
        import os, tessera
        context = tessera.init(num_cpus=2)
        state = context["state_dir"]
        assert context["local_cluster"], context
        @tessera.remote
        def where():
            return tessera.get_runtime_context().get_node_id()
        print("node", tessera.get(where.remote()))
        tessera.shutdown()
        print("gone", not os.path.exists(state))
    """, isolated_env(tmp_path, tessera_bin))
    assert result.returncode == 0, result.stderr
    lines = result.stdout.split("\n")
    assert any(line.startswith("node ") and len(line) > 5 for line in lines), result.stdout
    assert "gone True" in lines


def test_init_auto_without_a_cluster_is_a_connection_error(tmp_path, tessera_bin):
    result = python("""
        import tessera
        try:
            tessera.init(address="auto")
        except ConnectionError as e:
            print("ConnectionError:", e)
    """, isolated_env(tmp_path, tessera_bin))
    assert result.returncode == 0, result.stderr
    assert "Could not find any running tessera instance" in result.stdout


def test_a_second_init_is_refused_unless_asked_and_the_context_manager_shuts_down(
        tmp_path, tessera_bin):
    result = python("""
        import tessera
        with tessera.init(num_cpus=1):
            try:
                tessera.init()
            except RuntimeError as e:
                print("refused:", "twice by accident" in str(e))
            tessera.init(ignore_reinit_error=True)
            print("inside", tessera.is_initialized())
        print("after", tessera.is_initialized())
        try:
            tessera.init(bogus=1)
        except RuntimeError as e:
            print("unknown:", e)
    """, isolated_env(tmp_path, tessera_bin))
    assert result.returncode == 0, result.stderr
    assert "refused: True" in result.stdout
    assert "inside True" in result.stdout
    assert "after False" in result.stdout
    assert "unknown: Unknown keyword argument(s): bogus" in result.stdout


def test_the_first_remote_call_connects_on_its_own(tmp_path, tessera_bin):
    result = python("""
        import tessera
        @tessera.remote
        def one():
            return 1
        print("value", tessera.get(one.remote()), tessera.is_initialized())
    """, isolated_env(tmp_path, tessera_bin))
    assert result.returncode == 0, result.stderr
    assert "value 1 True" in result.stdout


def test_connecting_to_a_cluster_with_node_options_is_a_value_error(cluster):
    result = cluster.python(textwrap.dedent("""
        import tessera
        try:
            tessera.init(address="auto", num_cpus=3)
        except ValueError as e:
            print(e)
    """))
    assert "When connecting to an existing cluster, num_cpus must not be provided." in result.stdout
