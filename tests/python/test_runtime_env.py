"""Runtime environments (Ray's runtime_env) on a two-node simulated cluster: working_dir and
py_modules shipped once per node into a cache named by content (one folder per content hash,
0700), the task's cwd and sys.path set from them, a changed folder shipped under a new hash,
workers never reused across environments, the job's runtime_env merged under a task's (env_vars
merged, other fields overridden), and what needs a package index or a remote URI refused at the
call with a one-line error, nothing submitted."""
import os
import stat
import textwrap
import zipfile

import pytest

import tessera
from tessera.util.scheduling_strategies import NodeAffinitySchedulingStrategy


def report():
    """What a task sees: its modules' values, its data file, its cwd and node."""
    import os as _os

    import pkgmod
    import single
    import wdmod
    import zmod

    with open("data.txt") as f:
        data = f.read()
    return {"values": (wdmod.VALUE, pkgmod.VALUE, single.VALUE, zmod.VALUE), "data": data,
            "cwd": _os.getcwd(), "node": tessera.get_runtime_context().get_node_id()}


@pytest.fixture
def folders(tmp_path):
    wd = tmp_path / "wd"
    wd.mkdir()
    (wd / "wdmod.py").write_text("VALUE = 'wd'\n")
    (wd / "data.txt").write_text("first")
    pkg = tmp_path / "pkgmod"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("VALUE = 'pkg'\n")
    (tmp_path / "single.py").write_text("VALUE = 'single'\n")
    with zipfile.ZipFile(tmp_path / "zipped.zip", "w") as z:
        z.writestr("zmod.py", "VALUE = 'zip'\n")
    return {"working_dir": str(wd),
            "py_modules": [str(pkg), str(tmp_path / "single.py"), str(tmp_path / "zipped.zip")]}


def cache(cluster, node):
    """The content-addressed folders of a node's runtime_env cache."""
    root = cluster.state / "nodes" / node / "jobs"
    return sorted(p.name for p in root.iterdir() if p.name.startswith("env-")) \
        if root.exists() else []


def pinned(function, node, env):
    return function.options(runtime_env=env,
                            scheduling_strategy=NodeAffinitySchedulingStrategy(node, soft=False))


def test_working_dir_and_py_modules_reach_tasks_on_each_node_and_are_cached(cluster, folders):
    task = tessera.remote(report)
    env = dict(folders)
    ids = tessera._core.runtime_env_files(None, []).ids  # the binding exists
    assert ids == []
    seen = {}
    for node in cluster.node_ids():
        before = cache(cluster, node)
        result = tessera.get(pinned(task, node, env).remote(), timeout=60)
        assert result["node"] == node
        assert result["values"] == ("wd", "pkg", "single", "zip")
        assert result["data"] == "first"
        # The worker runs in the node's cached copy of the working_dir, not the driver's folder.
        assert result["cwd"] != folders["working_dir"]
        assert os.path.basename(result["cwd"]).startswith("env-")
        added = sorted(set(cache(cluster, node)) - set(before))
        assert len(added) == 4  # the working_dir and three py_modules, one folder each
        assert os.path.basename(result["cwd"]) in added
        root = cluster.state / "nodes" / node / "jobs"
        assert stat.S_IMODE(os.stat(root).st_mode) == 0o700
        seen[node] = added
    # A second task (another copy of the options, same contents) reuses each node's cache: no new
    # folder, and the folder unpacked first is the one used (a mark left in it is still there).
    for node in cluster.node_ids():
        wd_folder = next(p for p in seen[node]
                         if (cluster.state / "nodes" / node / "jobs" / p / "wdmod.py").exists())
        mark = cluster.state / "nodes" / node / "jobs" / wd_folder / "mark"
        mark.write_text("kept")
        again = tessera.remote(report)
        result = tessera.get(pinned(again, node, dict(folders)).remote(), timeout=60)
        assert result["values"] == ("wd", "pkg", "single", "zip")
        assert set(seen[node]) <= set(cache(cluster, node))
        assert len(cache(cluster, node)) == len(set(cache(cluster, node)))
        assert sorted(set(cache(cluster, node)) - set(seen[node])) == []
        assert mark.read_text() == "kept"


def test_a_changed_folder_is_shipped_under_a_new_hash(cluster, folders):
    node = cluster.node_ids()[0]
    task = tessera.remote(report)
    assert tessera.get(pinned(task, node, folders).remote(), timeout=60)["data"] == "first"
    before = set(cache(cluster, node))
    with open(os.path.join(folders["working_dir"], "data.txt"), "w") as f:
        f.write("second")
    result = tessera.get(pinned(task, node, folders).remote(), timeout=60)
    assert result["data"] == "second"
    added = set(cache(cluster, node)) - before
    assert added == {os.path.basename(result["cwd"])}  # only the working_dir changed


@tessera.remote
def plain():
    import importlib.util
    return os.getcwd(), importlib.util.find_spec("wdmod") is not None, os.environ.get("RT_ENV")


def test_a_worker_is_not_reused_for_another_environment(cluster, folders):
    node = cluster.node_ids()[0]
    with_env = pinned(plain, node, {**folders, "env_vars": {"RT_ENV": "set"}})
    cwd, found, var = tessera.get(with_env.remote(), timeout=60)
    assert found and var == "set" and os.path.basename(cwd).startswith("env-")
    # The same function without the runtime_env, on the same node, right after: another worker.
    without = plain.options(scheduling_strategy=NodeAffinitySchedulingStrategy(node, soft=False))
    for _ in range(3):
        cwd, found, var = tessera.get(without.remote(), timeout=60)
        assert not found and var is None and not os.path.basename(cwd).startswith("env-")
    # env_vars alone: its own worker too.
    only_vars = without.options(runtime_env={"env_vars": {"RT_ENV": "vars"}})
    assert tessera.get(only_vars.remote(), timeout=60)[2] == "vars"


def test_an_actor_runs_with_its_runtime_env(cluster, folders):
    @tessera.remote
    class Reporter:
        def __init__(self):
            import wdmod
            self.value = wdmod.VALUE

        def report(self):
            return self.value, report()

    actor = Reporter.options(runtime_env=folders).remote()
    value, seen = tessera.get(actor.report.remote(), timeout=60)
    assert value == "wd" and seen["values"] == ("wd", "pkg", "single", "zip")
    assert seen["data"] == "first"


def _nothing_submitted(monkeypatch):
    for name in ("submit_task", "create_actor"):
        def submitted(*args, _name=name, **kwargs):
            raise AssertionError(f"_core.{_name} was called")
        monkeypatch.setattr(tessera._core, name, submitted)


@pytest.mark.parametrize("runtime_env, error", [
    ({"pip": ["requests"]}, "runtime_env 'pip' is not supported: Tessera installs no packages "
                            "(install them on the nodes' images)"),
    ({"conda": "env.yaml"}, "runtime_env 'conda' is not supported: Tessera installs no packages "
                            "(install them on the nodes' images)"),
    ({"uv": ["numpy"]}, "runtime_env 'uv' is not supported: Tessera installs no packages "
                        "(install them on the nodes' images)"),
    ({"container": {"image": "x"}}, "runtime_env 'container' is not supported: Tessera starts no "
                                    "containers (run the nodes from the image instead)"),
    ({"image_uri": "x"}, "runtime_env 'image_uri' is not supported: Tessera starts no containers "
                         "(run the nodes from the image instead)"),
    ({"working_dir": "s3://bucket/code.zip"}, "runtime_env 'working_dir' is not supported: "
     "remote URIs (s3://) are not fetched by Tessera; give a local path"),
    ({"py_modules": ["https://example.com/m.zip"]}, "runtime_env 'py_modules' is not supported: "
     "remote URIs (https://) are not fetched by Tessera; give a local path"),
    ({"working_dir": "/no/such/folder"}, "runtime_env working_dir: /no/such/folder is not a "
                                         "local folder"),
    ({"excludes": ["*.log"]}, "runtime_env key 'excludes' is not supported (supported: env_vars, "
                              "working_dir, py_modules)"),
])
def test_what_needs_an_index_or_a_service_is_refused_at_the_call(cluster, monkeypatch,
                                                                 runtime_env, error):
    _nothing_submitted(monkeypatch)
    exact = "^" + __import__("re").escape(error) + "$"
    with pytest.raises(ValueError, match=exact):
        plain.options(runtime_env=runtime_env)
    with pytest.raises(ValueError, match=exact):
        tessera.remote(runtime_env=runtime_env)(report)

    class Actor:
        pass

    with pytest.raises(ValueError, match=exact):
        tessera.remote(Actor).options(runtime_env=runtime_env)


def test_a_working_dir_over_the_limit_is_refused_at_the_call(cluster, monkeypatch, tmp_path):
    big = tmp_path / "big"
    big.mkdir()
    with open(big / "blob", "wb") as f:
        f.truncate(tessera._core.WORKING_DIR_MAX_FILE_BYTES + 1)
    _nothing_submitted(monkeypatch)
    with pytest.raises(ValueError, match="^runtime_env working_dir: .*blob is .*; a working "
                                         "directory holds at most 3 MiB of files"):
        plain.options(runtime_env={"working_dir": str(big)}).remote()


def test_the_jobs_runtime_env_is_merged_under_a_tasks(cluster, folders, tmp_path):
    other = tmp_path / "other"
    other.mkdir()
    (other / "data.txt").write_text("task's own")
    script = textwrap.dedent(f"""
        import os, tessera
        tessera.init(runtime_env={{"working_dir": {folders['working_dir']!r},
                                   "py_modules": {folders['py_modules']!r},
                                   "env_vars": {{"A": "job", "B": "job"}}}})

        @tessera.remote
        def look():
            import wdmod, pkgmod
            return (wdmod.VALUE, pkgmod.VALUE, open("data.txt").read(), os.environ.get("A"),
                    os.environ.get("B"))

        @tessera.remote(runtime_env={{"working_dir": {str(other)!r}, "env_vars": {{"B": "task"}}}})
        def own():
            import importlib.util, pkgmod
            return (importlib.util.find_spec("wdmod") is not None, pkgmod.VALUE,
                    open("data.txt").read(), os.environ.get("A"), os.environ.get("B"))

        print(tessera.get(look.remote(), timeout=60))
        print(tessera.get(own.remote(), timeout=60))
        """)
    r = cluster.python(script, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    lines = r.stdout.strip().splitlines()
    assert lines[-2] == str(("wd", "pkg", "first", "job", "job"))
    # The task's working_dir replaces the job's, py_modules stay the job's, env_vars merge.
    assert lines[-1] == str((False, "pkg", "task's own", "job", "task"))


def what_a_child_sees():
    import os as _os

    import pkgmod
    import single
    import wdmod
    import zmod

    with open("data.txt") as f:
        data = f.read()
    return {"values": (wdmod.VALUE, pkgmod.VALUE, single.VALUE, zmod.VALUE), "data": data,
            "env": (_os.environ.get("A"), _os.environ.get("B"))}


@tessera.remote
def spawn_nested(own_env):
    # A task and an actor made inside a task: they run in its runtime_env, under their own.
    import tessera as _tessera

    @_tessera.remote
    class Reporter:
        def report(self):
            return what_a_child_sees()

    child = _tessera.remote(what_a_child_sees)
    if own_env:
        child = child.options(runtime_env=own_env)
    actor = Reporter.remote()
    return _tessera.get([child.remote(), actor.report.remote()], timeout=60)


def test_tasks_and_actors_a_task_makes_inherit_its_runtime_env(cluster, folders):
    env = dict(folders, env_vars={"A": "parent", "B": "parent"})
    [from_task, from_actor] = tessera.get(
        spawn_nested.options(runtime_env=env).remote(None), timeout=120)
    expected = {"values": ("wd", "pkg", "single", "zip"), "data": "first",
                "env": ("parent", "parent")}
    assert from_task == expected
    assert from_actor == expected
    # A child's own runtime_env goes over the inherited one, env_vars merged (the child's win).
    [own, _] = tessera.get(
        spawn_nested.options(runtime_env=env).remote({"env_vars": {"B": "child"}}), timeout=120)
    assert own == dict(expected, env=("parent", "child"))


def test_init_refuses_pip_with_the_one_line_error(cluster):
    script = textwrap.dedent("""
        import tessera
        try:
            tessera.init(runtime_env={"pip": ["requests"]})
        except ValueError as e:
            print("refused:", e)
        """)
    r = cluster.python(script, timeout=60)
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stdout.strip() == ("refused: runtime_env 'pip' is not supported: Tessera installs no "
                                "packages (install them on the nodes' images)")
