"""Elastic gangs end to end (docs/train.md, "Elastic ranges"): `tessera train --nnodes 2:3` on a
local cluster of three CPU nodes starts with three ranks, shrinks to two when a node's agent is
killed (a failure: counted), and grows back to three when that agent returns (a membership
change: not counted), finishing from its checkpoints with every rank's parameters identical."""
import os
import re
import signal

import pytest

from conftest import PYTHON, SCRIPT, cmdline, num, run, wait_for
from test_train import checksums

HERE = os.path.dirname(os.path.abspath(__file__))
THREE_NODES = os.path.join(HERE, "three_nodes.yaml")
WORLD = re.compile(r"^\[rank\d+\]: rank (\d+)/(\d+) .*TORCHELASTIC_RESTART_COUNT=(\d+)", re.M)


def wait_started(client, world, restart_count, timeout=60):
    """Until every rank of a gang of `world` has printed its start line (so it really ran)."""
    def started():
        if client.poll() is not None:
            pytest.fail(f"train exited {client.poll()}:\n{client.stdout()[-3000:]}\n"
                        f"{client.stderr()[-3000:]}")
        seen = {int(r) for r, w, c in WORLD.findall(client.stdout())
                if int(w) == world and int(c) == restart_count}
        return len(seen) == world
    wait_for(started, timeout, f"{world} ranks started with restart count {restart_count}")


def test_elastic_gang_shrinks_and_grows(make_cluster, torch_module):
    cluster = make_cluster(THREE_NODES, "--node-timeout", "2s")
    name = cluster.unique_name("elastic")
    ckpt = cluster.work / "ckpt"
    client = cluster.start(
        "train", "--nnodes", "2:3", "--nproc-per-node", "1", "--max-restarts", "1",
        "--elastic-check", "500ms", "--start-timeout", "30s", "--name", name, "--",
        PYTHON, SCRIPT, "--steps", "120", "--step-delay", "0.1", "--checkpoint-dir", ckpt,
        "--checkpoint-every", "5", "--output", cluster.work / "final.pt", log_name=name)
    job_id = cluster.job_id(name)
    status = cluster.wait_running(job_id, 3)
    assert num(status.get("world_size")) == 3, status
    wait_started(client, 3, 0)

    # A node's agent dies: its rank with it; the gang restarts on the two nodes left.
    victim = cluster.rank(status, 2).get("node_id")
    agent_pid = int((cluster.state / "nodes" / victim / "agent.pid").read_text().split()[0])
    assert victim in cmdline(agent_pid), cmdline(agent_pid)
    agent_cmd = cmdline(agent_pid).split()
    os.kill(agent_pid, signal.SIGKILL)
    status = cluster.wait_status(
        job_id, lambda s: s.get("state") == "RUNNING" and num(s.get("world_size")) == 2 and
        num(s.get("restart_count")) == 1, 60, "the gang shrunk to 2 ranks after a failure")
    assert victim not in {r.get("node_id") for r in status["ranks"]}, status
    wait_started(client, 2, 1)

    # The node comes back (a new agent on it): the gang grows to 3 without using its budget.
    head = (cluster.state / "head.address").read_text().strip()
    restart = run([cluster.tessera, "start", "--address", head, "--cluster-file", THREE_NODES,
                   "--node-id", victim, "--state-dir", cluster.state,
                   "--object-store-memory", "16MiB"], timeout=60,
                  cwd=cluster.work, env=cluster.env)
    assert restart.returncode == 0, f"{agent_cmd}: {restart.stdout}\n{restart.stderr}"
    status = cluster.wait_status(
        job_id, lambda s: s.get("state") == "RUNNING" and num(s.get("world_size")) == 3 and
        num(s.get("membership_changes")) == 1, 60, "the gang grown back to 3 ranks")
    assert num(status.get("restart_count")) == 1, status

    rc = client.wait(timeout=150)
    out, err = client.stdout(), client.stderr()
    assert rc == 0, f"tessera train exited {rc}:\n{out[-4000:]}\n{err[-4000:]}"
    final = cluster.status(job_id)
    assert final.get("state") == "SUCCEEDED", final
    assert num(final.get("world_size")) == 3 and num(final.get("restart_count")) == 1, final
    assert num(final.get("membership_changes")) == 1, final
    # The world sizes the ranks saw, in order of their starts: 3, then 2, then 3 again; the
    # restart count went up with the failure and not with the growth.
    starts = [(int(w), int(c)) for _, w, c in WORLD.findall(out)]
    sizes = []
    for world, count in starts:
        if not sizes or sizes[-1] != (world, count):
            sizes.append((world, count))
    assert sizes == [(3, 0), (2, 1), (3, 1)], f"world sizes and restart counts seen: {starts}"
    assert "membership change" in err, err[-3000:]
    sums = checksums(out)
    assert sorted(sums) == [0, 1, 2] and len(set(sums.values())) == 1, sums
