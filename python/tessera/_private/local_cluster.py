"""A one-node cluster on this machine, as `tessera.init()` starts it when there is none to join
(Ray's `ray.init()` does the same): a head and one node agent with this machine's hardware, in a
fresh private state folder, started with the `tessera` CLI and stopped by `stop()` (at
`tessera.shutdown()` or interpreter exit). Its object store is `object_store_memory` bytes, else
$TESSERA_OBJECT_STORE_MEMORY, else the CLI's default (30% of the available memory, at most 2 GiB).

Threading: one LocalCluster per driver, used from the thread that calls init/shutdown.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Dict, Optional

from tessera._private.binary import tessera_bin

# Starting may take a while on a loaded 2-core machine (the store is allocated at start).
_START_TIMEOUT_S = 120


def _format_resources(num_cpus, num_gpus, resources) -> str:
    pairs = dict(resources or {})
    if num_cpus is not None:
        pairs["CPU"] = num_cpus
    if num_gpus is not None:
        pairs["GPU"] = num_gpus
    return ",".join(f"{name}={value:g}" if isinstance(value, float) else f"{name}={value}"
                    for name, value in sorted(pairs.items()))


class LocalCluster:
    """The head and node agent in `state_dir`, which this object made and removes."""

    def __init__(self, state_dir: Path):
        self.state_dir = state_dir

    @classmethod
    def start(cls, *, num_cpus: Optional[float] = None, num_gpus: Optional[float] = None,
              resources: Optional[Dict[str, float]] = None,
              labels: Optional[Dict[str, str]] = None,
              object_store_memory: Optional[int] = None) -> "LocalCluster":
        # Short (unix socket paths are limited) and private (mode 0700, made here).
        state_dir = Path(tempfile.mkdtemp(prefix="tessera-"))
        cluster = cls(state_dir)
        binary = tessera_bin()
        common = ["--state-dir", str(state_dir), "--timeout", f"{_START_TIMEOUT_S}s"]
        try:
            cluster._run([binary, "start", "--head", "--port", "0"] + common)
            head = (state_dir / "head.address").read_text().strip()
            node = [binary, "start", "--address", head] + common
            text = _format_resources(num_cpus, num_gpus, resources)
            if text:
                node += ["--resources", text]
            if labels:
                node += ["--labels", ",".join(f"{k}={v}" for k, v in sorted(labels.items()))]
            if object_store_memory is None and os.environ.get("TESSERA_OBJECT_STORE_MEMORY"):
                object_store_memory = int(os.environ["TESSERA_OBJECT_STORE_MEMORY"])
            if object_store_memory is not None:
                node += ["--object-store-memory", f"{int(object_store_memory)}B"]
            cluster._run(node)
        except BaseException:
            cluster.stop()
            raise
        return cluster

    def _run(self, command) -> None:
        try:
            done = subprocess.run(command, capture_output=True, text=True,
                                  stdin=subprocess.DEVNULL, timeout=_START_TIMEOUT_S + 30)
        except subprocess.TimeoutExpired:
            raise ConnectionError(f"starting a local tessera cluster timed out: "
                                  f"{' '.join(command)}") from None
        if done.returncode != 0:
            why = (done.stderr.strip() or done.stdout.strip()).splitlines()
            raise ConnectionError("cannot start a local tessera cluster: "
                                  + (why[-1] if why else f"exit {done.returncode}"))

    def stop(self) -> None:
        """Stops every process of the cluster and removes its state folder."""
        if self.state_dir is None:
            return
        try:
            subprocess.run([tessera_bin(), "stop", "--state-dir", str(self.state_dir)],
                           capture_output=True, stdin=subprocess.DEVNULL, timeout=60)
        except (subprocess.TimeoutExpired, FileNotFoundError):
            pass
        shutil.rmtree(self.state_dir, ignore_errors=True)
        self.state_dir = None
