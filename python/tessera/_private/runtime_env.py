"""Runtime environments (Ray's `runtime_env`) for tasks, actors and jobs: `env_vars`,
`working_dir` and `py_modules`.

`working_dir` is a local folder: the task's or actor's worker runs with it as its current folder
and first on sys.path. `py_modules` are local folders (Python packages, imported by their folder's
name), .py files or .zip files, put on the workers' sys.path after it. They are packed here by
the runtime's own packer (the one `tessera job submit --working-dir` uses: regular files and
folders only, at most _core.WORKING_DIR_MAX_FILE_BYTES of files), each under the SHA-256 of its
archive; the lease source ships an archive to a node's agent the first time a worker there needs
it, and the agent unpacks it once per node into a 0700 folder of its own named by that content
id (checked against the bytes), which every later worker and driver reuses. A worker's lease
shape includes the ids and env_vars, so a worker is never reused for another environment.

Ray's merge: a task's or actor's runtime_env overrides the job's (`tessera.init(runtime_env=)`)
field by field, except `env_vars`, which are merged (the task's win). Inheritance, as Ray's: the
tasks and actors a task or actor submits get its (merged) runtime_env under their own. Its
worker learns it from TESSERA_RUNTIME_ENV, set with the env_vars: the env_vars and whether a
working_dir and how many py_modules came with it, which the worker finds where its lease put
them (first on its PYTHONPATH); they are packed again from there for the children (the same
files; a new content id only if the packer's bytes differ).

Whatever needs a package index or another service (pip, conda, uv, containers, remote URIs) is
refused with a one-line error when the options are given, and nothing is submitted.

Threading: Resolved is thread-safe. Cost: folders are read and hashed once per remote function or
actor class (and per `.options()` copy) and session, at its first call; later calls reuse that.
"""

from __future__ import annotations

import json
import os
import threading
import types
from typing import Any, Dict, List, Optional, Tuple

from tessera import _core
# Used at call time only: worker imports this module, and this one is imported either way round.
from tessera._private import worker as _worker

SUPPORTED = ("env_vars", "working_dir", "py_modules")
# The variable that tells a worker the runtime_env its lease was made with (for inheritance).
INHERITED_VARIABLE = "TESSERA_RUNTIME_ENV"

# What each refused key needs, for its one-line error.
_REFUSED = {
    "pip": "Tessera installs no packages (install them on the nodes' images)",
    "conda": "Tessera installs no packages (install them on the nodes' images)",
    "uv": "Tessera installs no packages (install them on the nodes' images)",
    "container": "Tessera starts no containers (run the nodes from the image instead)",
    "image_uri": "Tessera starts no containers (run the nodes from the image instead)",
    "java_jars": "Tessera runs no Java workers",
    "nsight": "Tessera runs no profilers for workers",
}


def _not_supported(key: str, why: str) -> ValueError:
    return ValueError(f"runtime_env '{key}' is not supported: {why}")


def _local_path(key: str, value: Any) -> str:
    if isinstance(value, os.PathLike):
        value = os.fspath(value)
    if not isinstance(value, str):
        raise TypeError(f"runtime_env['{key}'] must be a local path (str), but received "
                        f"{type(value).__name__}")
    if "://" in value:
        scheme = value.split("://", 1)[0]
        raise _not_supported(key, f"remote URIs ({scheme}://) are not fetched by Tessera; give a "
                                  "local path")
    return value


def _module_path(value: Any) -> str:
    """A py_modules entry's local path (a module object: its package folder or file)."""
    if isinstance(value, types.ModuleType):
        path = getattr(value, "__file__", None)
        if not path:
            raise ValueError(f"runtime_env py_modules: module {value.__name__} has no file")
        return os.path.dirname(path) if os.path.basename(path) == "__init__.py" else path
    path = _local_path("py_modules", value)
    if path.endswith(".whl"):
        raise _not_supported("py_modules", f"{path} is a wheel, which needs pip: Tessera "
                                           "installs no packages (give the package's folder)")
    if not os.path.exists(path):
        raise ValueError(f"runtime_env py_modules: {path} does not exist")
    if not os.path.isdir(path) and not path.endswith((".py", ".zip")):
        raise ValueError(f"runtime_env py_modules: {path} is not a folder, a .py or a .zip file")
    return path


def validate(runtime_env: Optional[dict]) -> None:
    """Raises the one-line error for a runtime_env that cannot be honoured (TypeError for a
    wrong type, ValueError for what is not supported or not there)."""
    for key, value in (runtime_env or {}).items():
        if key in _REFUSED:
            raise _not_supported(key, _REFUSED[key])
        if key not in SUPPORTED:
            raise ValueError(f"runtime_env key '{key}' is not supported (supported: "
                             f"{', '.join(SUPPORTED)})")
        if key == "env_vars":
            if not isinstance(value, dict) or not all(
                    isinstance(k, str) and isinstance(v, str) for k, v in value.items()):
                raise TypeError("runtime_env['env_vars'] must be a dict of str to str, but "
                                f"received {value!r}")
        elif key == "working_dir":
            if value is None:
                continue
            path = _local_path(key, value)
            if not os.path.isdir(path):
                raise ValueError(f"runtime_env working_dir: {path} is not a local folder")
        elif key == "py_modules":
            if value is None:
                continue
            if not isinstance(value, (list, tuple)):
                raise TypeError("runtime_env['py_modules'] must be a list of local paths or "
                                f"modules, but received {type(value).__name__}")
            for entry in value:
                _module_path(entry)


def merge(job: Optional[dict], own: Optional[dict]) -> Dict[str, Any]:
    """Ray's merge: `own`'s fields override the job's, env_vars are merged (own's win)."""
    merged = dict(job or {})
    for key, value in (own or {}).items():
        if key == "env_vars" and merged.get("env_vars"):
            merged["env_vars"] = {**merged["env_vars"], **(value or {})}
        else:
            merged[key] = value
    return {k: v for k, v in merged.items() if v not in (None, {}, [])}


def _packed_module(value: Any) -> Tuple[bytes, str]:
    path = _module_path(value)
    label = "runtime_env py_modules"
    if os.path.isdir(path):
        name = os.path.basename(os.path.normpath(os.path.abspath(path)))
        return _core.pack_directory(path, label, name), ""
    archive = _core.pack_file(path, label)
    # A zip is imported from (zipimport): the file itself goes on sys.path.
    return archive, os.path.basename(path) if path.endswith(".zip") else ""


def files_for(runtime_env: Dict[str, Any]) -> Optional["_core.RuntimeEnvFiles"]:
    """The packed folders of a (merged, validated) runtime_env; None when it has none."""
    working_dir = runtime_env.get("working_dir")
    modules = runtime_env.get("py_modules") or []
    if working_dir is None and not modules:
        return None
    archive = None
    if working_dir is not None:
        archive = _core.pack_directory(_local_path("working_dir", working_dir),
                                       "runtime_env working_dir")
    return _core.runtime_env_files(archive, [_packed_module(m) for m in modules])


class Resolved:
    """The core options of one remote function or actor class with its runtime_env merged over
    the job's, made once per session (the job's runtime_env is init's), at the first call."""

    def __init__(self, own: Optional[dict]) -> None:
        self._own = own
        self._lock = threading.Lock()
        self._session = -1
        self._base: Optional[dict] = None
        self._options: Optional[dict] = None

    def options(self, core_options: dict) -> dict:
        """`core_options` with the merged env and folders ("env", "runtime_env_files")."""
        session = _worker.session()
        if self._session == session and self._base is core_options:
            return self._options
        with self._lock:
            if self._session != session or self._base is not core_options:
                merged = merge(_worker.job_runtime_env() or inherited(), self._own)
                options = dict(core_options)
                options["env"] = dict(merged.get("env_vars") or {})
                if merged:
                    options["env"][INHERITED_VARIABLE] = _describe(merged)
                options["runtime_env_files"] = files_for(merged)
                self._options, self._base, self._session = options, core_options, session
            return self._options


def _describe(merged: Dict[str, Any]) -> str:
    """What TESSERA_RUNTIME_ENV says of a merged runtime_env."""
    return json.dumps({"env_vars": merged.get("env_vars") or {},
                       "working_dir": merged.get("working_dir") is not None,
                       "py_modules": len(merged.get("py_modules") or [])}, sort_keys=True)


def _unpacked_module(root: str) -> Optional[str]:
    """The py_modules entry a worker's PYTHONPATH entry was unpacked from: a zip itself; else
    the one folder or .py file its unpacked root holds."""
    if root.endswith(".zip") and os.path.isfile(root):
        return root
    try:
        items = [item for item in os.listdir(root) if not item.startswith(".")]
    except OSError:
        return None
    return os.path.join(root, items[0]) if len(items) == 1 else None


_inherited_lock = threading.Lock()
_inherited_read = False
_inherited: Optional[Dict[str, Any]] = None


def inherited() -> Optional[Dict[str, Any]]:
    """In a worker, the runtime_env its lease was made with (None: none, or not a worker), read
    once from TESSERA_RUNTIME_ENV and the PYTHONPATH its lease set."""
    global _inherited_read, _inherited
    if _inherited_read:
        return _inherited
    with _inherited_lock:
        if not _inherited_read:
            _inherited = _read_inherited() if _core.is_worker() else None
            _inherited_read = True
    return _inherited


def _read_inherited() -> Optional[Dict[str, Any]]:
    try:
        told = json.loads(os.environ.get(INHERITED_VARIABLE, ""))
    except ValueError:
        return None
    if not isinstance(told, dict):
        return None
    out: Dict[str, Any] = {}
    env_vars = told.get("env_vars")
    if isinstance(env_vars, dict) and all(
            isinstance(k, str) and isinstance(v, str) for k, v in env_vars.items()):
        out["env_vars"] = dict(env_vars)
    paths = [p for p in os.environ.get("PYTHONPATH", "").split(":") if p]
    if told.get("working_dir") is True and paths:
        out["working_dir"] = paths.pop(0)
    count = told.get("py_modules")
    if isinstance(count, int) and 0 < count <= len(paths):
        modules = [_unpacked_module(p) for p in paths[:count]]
        out["py_modules"] = [m for m in modules if m is not None]
    return {k: v for k, v in out.items() if v}

