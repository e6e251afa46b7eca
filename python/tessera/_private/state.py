"""The cluster as a whole, as Ray's state calls show it: `nodes()`, `cluster_resources()`,
`available_resources()` (from the head; may be a heartbeat old), and this job's `timeline()`."""

from __future__ import annotations

import json
from typing import Any, Dict, List, Optional

from tessera import _core
from tessera._private import worker


def _list_nodes() -> List[Dict[str, Any]]:
    worker.auto_init()
    try:
        return _core.list_nodes()
    except _core.CoreError as e:
        worker.raise_core_error(e)


def nodes() -> List[Dict[str, Any]]:
    """One dict per node, with Ray's keys: NodeID, Alive, NodeManagerAddress,
    NodeManagerHostname, NodeManagerPort, Resources ({} when dead), Labels, and State."""
    out = []
    for node in _list_nodes():
        host, _, port = node["address"].rpartition(":")
        out.append({
            "NodeID": node["node_id"],
            "Alive": node["alive"],
            "State": node["state"],
            "NodeManagerAddress": host,
            "NodeManagerHostname": node["labels"].get("tessera.io/hostname", host),
            "NodeManagerPort": int(port) if port.isdigit() else 0,
            "NodeName": host,
            "Resources": dict(node["resources"]) if node["alive"] else {},
            "Labels": dict(node["labels"]),
        })
    return out


def _sum(key: str) -> Dict[str, float]:
    total: Dict[str, float] = {}
    for node in _list_nodes():
        if not node["alive"]:
            continue
        for name, amount in node[key].items():
            total[name] = total.get(name, 0.0) + amount
    return total


def cluster_resources() -> Dict[str, float]:
    """Every resource of the alive nodes, summed."""
    return _sum("resources")


def available_resources() -> Dict[str, float]:
    """What the alive nodes have free now, summed (resources fully in use are left out)."""
    return {name: amount for name, amount in _sum("available").items() if amount > 0}


def timeline(filename: Optional[str] = None) -> Optional[List[Dict[str, Any]]]:
    """This job's task runs and actor calls, as Ray's `ray.timeline` gives them: a list of Chrome
    trace events (Perfetto and chrome://tracing open them), or, given a filename, written there
    as a trace file (and None returned). Runs still being reported are sent first. The same as
    `tessera timeline JOB` on the command line, for this process's job."""
    worker.auto_init()
    try:
        trace = json.loads(_core.timeline_json())
    except _core.CoreError as e:
        worker.raise_core_error(e)
    if filename is None:
        return trace["traceEvents"]
    with open(filename, "w", encoding="utf-8") as out:
        json.dump(trace, out)
    return None
