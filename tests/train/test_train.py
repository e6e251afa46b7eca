"""End-to-end tests of `tessera train` (a gang of ranks, drop-in for torchrun) and `tessera job`.

Each test brings up its own local simulated cluster (conftest.py), runs the real PyTorch DDP
workload examples/train/ddp_train.py (gloo on CPU) or a shell command, and takes the cluster down.
Final parameters are compared bit for bit with `torchrun --standalone --nproc-per-node 4` running
the same script with the same seed.

    python3 -m pytest -q tests/train            # TESSERA_BIN=... to pick the binary
"""
import os
import re
import signal
import subprocess
import time

import pytest

from conftest import (ONE_SLICE, PYTHON, SCRIPT, TERMINAL_STATES, TWO_SLICES,
                      assert_same_parameters, cmdline, find_process, num, pid_alive,
                      process_state, wait_for)

SEED = 1234
STEPS = 40
SLICE = ["--accelerator", "TPU-V6E", "--topology", "4x4"]
RANK_LINE = re.compile(r"^\[rank(\d+)\]: (.*)$")
SHA_LINE = re.compile(r"^rank (\d+) params-sha256 ([0-9a-f]{64})$")


def rank_lines(text):
    """[(rank, line)] of a foreground train's `[rankN]: ` prefixed output."""
    out = []
    for line in text.splitlines():
        m = RANK_LINE.match(line)
        if m:
            out.append((int(m.group(1)), m.group(2)))
    return out


def checksums(text):
    """{rank: sha256} from the `rank R params-sha256 HEX` lines (the last one of each rank)."""
    sums = {}
    for prefix_rank, line in rank_lines(text):
        m = SHA_LINE.match(line)
        if m:
            assert int(m.group(1)) == prefix_rank, f"rank {prefix_rank} printed {line!r}"
            sums[prefix_rank] = m.group(2)
    return sums


def ddp_command(output, steps=STEPS, checkpoint_dir=None, step_delay=0.0):
    cmd = [PYTHON, SCRIPT, "--steps", steps, "--seed", SEED, "--output", output]
    if checkpoint_dir is not None:
        cmd += ["--checkpoint-dir", checkpoint_dir, "--checkpoint-every", 5]
    if step_delay:
        cmd += ["--step-delay", step_delay]
    return [str(c) for c in cmd]


def last_stderr_line(text):
    lines = [line for line in text.splitlines() if line.strip()]
    return lines[-1] if lines else ""


def rank_process(status_rank):
    """The pid of a rank's ddp_train.py process (checked on its command line before any signal)."""
    pid = num(status_rank.get("pid"))
    found = find_process(pid, "ddp_train.py")
    assert found, (f"rank {status_rank.get('rank')}: pid {pid} from job status is not a "
                   f"ddp_train.py process (cmdline {cmdline(pid)!r})")
    return found


def start_training(cluster, name, where, train_flags, checkpoint_dir, step_delay, steps=STEPS):
    """A foreground `tessera train` in the background, and its job id once it is listed."""
    output = cluster.work / "final.pt"
    client = cluster.start("train", *where, "--name", name, *train_flags, "--",
                           *ddp_command(output, steps, checkpoint_dir, step_delay),
                           log_name=name)
    job_id = cluster.job_id(name)
    return client, job_id, output


def wait_checkpoint(cluster, client, checkpoint_dir, timeout=90):
    """Waits until rank 0 has written a checkpoint (so a restart must resume, not start over)."""
    path = checkpoint_dir / "checkpoint.pt"

    def ready():
        if client.poll() is not None:
            pytest.fail(f"train exited {client.poll()} before its first checkpoint:\n"
                        f"{client.stdout()[-3000:]}\n{client.stderr()[-3000:]}")
        return path.exists()
    wait_for(ready, timeout, f"the first checkpoint in {checkpoint_dir}")


# ----------------------------------------------------------------------------------------------
# a. A slice gang runs a torchrun script unchanged and ends bit-identical to torchrun.


def test_slice_gang_matches_torchrun(make_cluster, torch_module, torchrun_reference):
    reference = torchrun_reference(STEPS, SEED)
    cluster = make_cluster(ONE_SLICE)
    name = cluster.unique_name("ddp")
    # A relative --output: the ranks run in the client's folder.
    cmd = [PYTHON, str(SCRIPT), "--steps", str(STEPS), "--seed", str(SEED), "--output", "final.pt"]
    started = time.monotonic()
    r = cluster.cli("train", *SLICE, "--name", name, "--", *cmd, timeout=150)
    elapsed = time.monotonic() - started
    assert r.returncode == 0, f"tessera train exited {r.returncode}:\n{r.stdout[-4000:]}\n{r.stderr[-4000:]}"
    print(f"4-rank DDP on a v6e 4x4 slice: {elapsed:.1f}s")

    # Every stdout line is a rank's, prefixed; the launcher's own lines go to stderr.
    for line in r.stdout.splitlines():
        assert RANK_LINE.match(line), f"stdout line without a [rankN]: prefix: {line!r}"
    for line in r.stderr.splitlines():
        assert RANK_LINE.match(line) or line.startswith("tessera: "), \
            f"stderr line neither a rank's nor the launcher's: {line!r}"
    lines = rank_lines(r.stdout)
    assert {rank for rank, _ in lines} == {0, 1, 2, 3}, f"ranks that printed: {lines[:20]}"
    for rank in range(4):
        assert any(line.startswith(f"rank {rank}/4 ") and "TORCHELASTIC_RESTART_COUNT=0" in line
                   for rr, line in lines if rr == rank), f"rank {rank} printed no start line"
    assert sum(1 for rr, line in lines if rr == 0 and line.startswith("step ")) == STEPS

    sums = checksums(r.stdout)
    assert sorted(sums) == [0, 1, 2, 3], f"checksum lines: {sums}"
    assert len(set(sums.values())) == 1, f"ranks ended different: {sums}"

    output = cluster.work / "final.pt"
    assert output.exists(), f"rank 0 wrote no {output}"
    assert_same_parameters(torch_module, output, reference)

    # One rank per slice host.
    status = cluster.status(cluster.job_id(name))
    assert status.get("state") == "SUCCEEDED", status
    assert num(status.get("world_size")) == 4
    hosts = sorted(r.get("node_id") for r in status.get("ranks", []))
    assert hosts == [f"v6e-0-w{i}" for i in range(4)], f"ranks ran on {hosts}"


# ----------------------------------------------------------------------------------------------
# b, c. A rank killed mid-training: restarted from the checkpoint, or the job fails naming it.


def test_killed_rank_restarts_from_checkpoint(make_cluster, torch_module, torchrun_reference):
    reference = torchrun_reference(STEPS, SEED)
    cluster = make_cluster(ONE_SLICE)
    ckpt = cluster.work / "ckpt"
    name = cluster.unique_name("restart")
    client, job_id, output = start_training(cluster, name, SLICE, ["--max-restarts", "1"],
                                            ckpt, step_delay=0.25)
    wait_checkpoint(cluster, client, ckpt)
    status = cluster.wait_running(job_id, 4)
    assert num(status.get("restart_count")) == 0
    victim = 2
    pid = rank_process(cluster.rank(status, victim))
    os.kill(pid, signal.SIGKILL)
    killed_at = time.monotonic()

    rc = client.wait(timeout=150)
    out, err = client.stdout(), client.stderr()
    assert rc == 0, f"tessera train exited {rc} after a restart:\n{out[-4000:]}\n{err[-4000:]}"
    status = cluster.status(job_id)
    assert status.get("state") == "SUCCEEDED", status
    assert num(status.get("restart_count")) == 1, status
    print(f"kill to success: {time.monotonic() - killed_at:.1f}s; "
          f"last_restart_ms {status.get('last_restart_ms')}")

    lines = rank_lines(out)
    # The second attempt: every rank says so, and resumed from a checkpoint, not from step 0.
    for rank in range(4):
        assert any(rr == rank and "TORCHELASTIC_RESTART_COUNT=1" in line for rr, line in lines), \
            f"rank {rank} never printed TORCHELASTIC_RESTART_COUNT=1"
    after_restart = lines[next(i for i, (_, line) in enumerate(lines)
                               if "TORCHELASTIC_RESTART_COUNT=1" in line):]
    resumed = [int(m.group(1)) for rr, line in after_restart if rr == 0
               for m in [re.match(r"rank 0 resumed from checkpoint at step (\d+)", line)] if m]
    assert resumed and resumed[0] > 0, "rank 0 did not resume from a checkpoint after the restart"
    assert not any(rr == 0 and line.startswith("step 1/") for rr, line in after_restart), \
        "the restarted gang ran step 1 again"

    sums = checksums(out)
    assert sorted(sums) == [0, 1, 2, 3] and len(set(sums.values())) == 1, sums
    assert_same_parameters(torch_module, output, reference)
    assert not pid_alive(pid)


def test_killed_rank_without_restarts_fails(make_cluster, torch_module):
    cluster = make_cluster(ONE_SLICE)
    ckpt = cluster.work / "ckpt"
    name = cluster.unique_name("norestart")
    client, job_id, _ = start_training(cluster, name, SLICE, ["--max-restarts", "0"],
                                       ckpt, step_delay=0.25)
    wait_checkpoint(cluster, client, ckpt)
    status = cluster.wait_running(job_id, 4)
    victim = 2
    pids = [rank_process(r) for r in status["ranks"]]
    os.kill(rank_process(cluster.rank(status, victim)), signal.SIGKILL)

    rc = client.wait(timeout=90)
    err = client.stderr()
    last = last_stderr_line(err)
    assert rc == 128 + signal.SIGKILL, f"exit code {rc} (want 137, the killed rank's):\n{err[-3000:]}"
    assert last.startswith("tessera: "), f"last stderr line is not the launcher's: {last!r}"
    assert re.search(rf"\brank {victim}\b", last), f"last stderr line does not name rank {victim}: {last!r}"
    assert "SIGKILL" in last or "signal 9" in last, f"last stderr line does not name the signal: {last!r}"
    assert job_id in last or name in last, f"last stderr line does not name the job: {last!r}"
    status = cluster.status(job_id)
    assert status.get("state") == "FAILED", status
    assert num(status.get("exit_code")) == 137, status
    wait_for(lambda: not any(pid_alive(p) for p in pids), 15, "every rank process to be gone")


# ----------------------------------------------------------------------------------------------
# d. A hung (SIGSTOPped) rank: the gang is stopped and restarted, or fails naming a hung rank.


def _stop_a_rank(cluster, max_restarts):
    ckpt = cluster.work / "ckpt"
    name = cluster.unique_name("hang")
    client, job_id, output = start_training(
        cluster, name, SLICE, ["--max-restarts", str(max_restarts), "--hang-timeout", "3s"],
        ckpt, step_delay=0.25)
    wait_checkpoint(cluster, client, ckpt)
    status = cluster.wait_running(job_id, 4)
    pid = rank_process(cluster.rank(status, 1))
    os.kill(pid, signal.SIGSTOP)
    return client, job_id, output, pid, time.monotonic()


def _release(pid):
    """A SIGSTOPped rank the launcher did not end (a failed test): continue and kill it."""
    if pid_alive(pid) and "ddp_train.py" in cmdline(pid):
        os.kill(pid, signal.SIGCONT)
        os.kill(pid, signal.SIGKILL)


def test_hung_rank_restarts(make_cluster, torch_module, torchrun_reference):
    reference = torchrun_reference(STEPS, SEED)
    cluster = make_cluster(ONE_SLICE)
    client, job_id, output, pid, stopped_at = _stop_a_rank(cluster, max_restarts=1)
    try:
        cluster.wait_status(job_id,
                            lambda s: num(s.get("restart_count")) >= 1 or
                            s.get("state") in ("RESTARTING",) + TERMINAL_STATES,
                            timeout=3 + 20, what="the hung gang to be restarted")
        detected = time.monotonic() - stopped_at
        print(f"SIGSTOP to restart: {detected:.1f}s (hang timeout 3s)")
        wait_for(lambda: not pid_alive(pid), 15, f"the stopped rank (pid {pid}) to be killed")
        rc = client.wait(timeout=120)
    finally:
        _release(pid)
    assert rc == 0, f"tessera train exited {rc}:\n{client.stdout()[-3000:]}\n{client.stderr()[-3000:]}"
    status = cluster.status(job_id)
    assert status.get("state") == "SUCCEEDED" and num(status.get("restart_count")) == 1, status
    assert any("TORCHELASTIC_RESTART_COUNT=1" in line for _, line in rank_lines(client.stdout()))
    assert_same_parameters(torch_module, output, reference)


def test_hung_rank_fails_without_restarts(make_cluster, torch_module):
    cluster = make_cluster(ONE_SLICE)
    client, job_id, _, pid, stopped_at = _stop_a_rank(cluster, max_restarts=0)
    try:
        rc = client.wait(timeout=3 + 30)
        elapsed = time.monotonic() - stopped_at
    finally:
        _release(pid)
    err = client.stderr()
    last = last_stderr_line(err)
    print(f"SIGSTOP to failure: {elapsed:.1f}s (hang timeout 3s); {last}")
    assert rc != 0, "a gang with a hung rank and no restarts left succeeded"
    assert elapsed < 3 + 25, f"the hang was noticed only after {elapsed:.1f}s"
    # The stopped rank is hung first, but the others then wait on it in an all-reduce without
    # output or CPU time: whichever rank the launcher notices first may be the one named.
    assert last.startswith("tessera: ") and re.search(r"\brank \d+\b", last) and "hung" in last, \
        f"last stderr line does not name a hung rank: {last!r}"
    status = cluster.status(job_id)
    assert status.get("state") == "FAILED", status
    wait_for(lambda: not pid_alive(pid), 15, f"the stopped rank (pid {pid}) to be killed")


# ----------------------------------------------------------------------------------------------
# e. Jobs owned by the cluster: submit, status, logs, stop; logs outlive the cluster.


def _workers(cluster):
    listed = cluster.cli_json("list", "workers", "--json")
    return [w for node in listed.get("nodes", []) for w in node.get("workers", [])]


def test_job_submit_status_logs_stop(make_cluster):
    cluster = make_cluster(ONE_SLICE)
    started = time.monotonic()
    r = cluster.cli("job", "submit", "--name", cluster.unique_name("hello"), "--",
                    "sh", "-c", "echo hello-from-a-submitted-job; sleep 1; echo done-too", timeout=20)
    returned = time.monotonic() - started
    assert r.returncode == 0, f"job submit exited {r.returncode}: {r.stdout}{r.stderr}"
    out_lines = [line for line in r.stdout.splitlines() if line.strip()]
    assert len(out_lines) == 1, f"job submit should print only the job id: {r.stdout!r}"
    short = out_lines[0].strip()
    assert returned < 10, f"job submit took {returned:.1f}s to return"

    status = cluster.wait_status(short, lambda s: s.get("state") in TERMINAL_STATES, 40,
                                 f"{short} to end")
    assert status.get("state") == "SUCCEEDED", status
    assert num(status.get("exit_code")) == 0
    logs = cluster.cli("job", "logs", short, timeout=20, check=True).stdout
    assert "hello-from-a-submitted-job" in logs and "done-too" in logs, logs
    rank0 = cluster.cli("job", "logs", short, "--rank", "0", timeout=20, check=True).stdout
    assert "hello-from-a-submitted-job" in rank0, rank0
    job_dir = cluster.state / "jobs" / short
    assert "hello-from-a-submitted-job" in (job_dir / "job.log").read_text(errors="replace")
    assert "hello-from-a-submitted-job" in (job_dir / "rank-0.log").read_text(errors="replace")

    # A long job, stopped.
    r = cluster.cli("job", "submit", "--name", cluster.unique_name("sleeper"), "--", "sleep", "60",
                    timeout=20, check=True)
    long_id = r.stdout.strip().splitlines()[-1].strip()
    status = cluster.wait_running(long_id, 1, timeout=40)
    rank = cluster.rank(status, 0)
    pid = num(rank.get("pid"))
    worker_id = rank.get("worker_id")
    sleeper = find_process(pid, "sleep")
    assert sleeper and pid_alive(sleeper), f"pid {pid} is not the job's sleep: {cmdline(pid)!r}"
    assert any(num(w.get("pid")) == pid and w.get("state") == "RUNNING" for w in _workers(cluster))

    r = cluster.cli("job", "stop", long_id, timeout=40)
    assert r.returncode == 0, f"job stop exited {r.returncode}: {r.stdout}{r.stderr}"
    status = cluster.wait_status(long_id, lambda s: s.get("state") in TERMINAL_STATES, 20,
                                 f"{long_id} to end")
    assert status.get("state") == "STOPPED", status
    wait_for(lambda: not pid_alive(sleeper), 15, f"the stopped job's process {sleeper} to be gone")
    running = [w for w in _workers(cluster)
               if w.get("state") == "RUNNING" and (num(w.get("pid")) == pid or
                                                   w.get("worker_id") == worker_id)]
    assert not running, f"the stopped job's worker still runs: {running}"

    # The logs outlive the cluster.
    r = cluster.down()
    assert r.returncode == 0, f"tessera down: {r.stdout}{r.stderr}"
    assert (job_dir / "job.log").exists(), f"tessera down removed {job_dir}"
    logs = cluster.cli("job", "logs", short, timeout=20)
    assert logs.returncode == 0, f"job logs after down: {logs.stdout}{logs.stderr}"
    assert "hello-from-a-submitted-job" in logs.stdout, logs.stdout


# ----------------------------------------------------------------------------------------------
# f. A killed foreground client leaves nothing behind.


def _slice_holders(cluster):
    listed = cluster.cli_json("list", "slices", "--json")
    held = {s.get("name"): s.get("held_by") for s in listed.get("slices", []) if s.get("held_by")}
    groups = [g.get("name") for g in listed.get("groups", [])
              if g.get("state") in ("PENDING", "RESERVED", "BROKEN")]
    return held, groups


def test_killed_client_releases_gang(make_cluster, torch_module):
    cluster = make_cluster(ONE_SLICE)
    name = cluster.unique_name("orphan")
    client, job_id, _ = start_training(cluster, name, SLICE, [], None, step_delay=0.2, steps=100000)
    status = cluster.wait_running(job_id, 4)
    pids = [rank_process(r) for r in status["ranks"]]
    wait_for(lambda: "[rank0]: step 1/" in client.stdout(), 60, "training to be under way")
    held, groups = _slice_holders(cluster)
    assert held.get("v6e-0"), f"the running gang holds no slice: {held} {groups}"

    os.kill(client.pid, signal.SIGKILL)
    killed_at = time.monotonic()
    client.wait(timeout=10)
    wait_for(lambda: not any(pid_alive(p) for p in pids), 20,
             "every rank of the killed client's job to be gone")
    ranks_gone = time.monotonic() - killed_at
    wait_for(lambda: _slice_holders(cluster) == ({}, []), 20,
             "the slice reservation to be released")
    print(f"client SIGKILL: ranks gone after {ranks_gone:.1f}s, "
          f"slice free after {time.monotonic() - killed_at:.1f}s")
    status = cluster.wait_status(job_id, lambda s: s.get("state") in TERMINAL_STATES, 20,
                                 f"{job_id} to end")
    assert status.get("state") in ("STOPPED", "FAILED"), status


# ----------------------------------------------------------------------------------------------
# g. A node agent of the gang's slice dies: the job finishes on the other slice.


def test_dead_node_moves_gang_to_other_slice(make_cluster, torch_module, torchrun_reference):
    reference = torchrun_reference(STEPS, SEED)
    cluster = make_cluster(TWO_SLICES, "--node-timeout", "3s")
    ckpt = cluster.work / "ckpt"
    name = cluster.unique_name("failover")
    client, job_id, output = start_training(cluster, name, SLICE, ["--max-restarts", "1"],
                                            ckpt, step_delay=0.3)
    wait_checkpoint(cluster, client, ckpt)
    status = cluster.wait_running(job_id, 4)
    first_nodes = {r.get("node_id") for r in status["ranks"]}
    first_slice = {n.rsplit("-w", 1)[0] for n in first_nodes}
    assert len(first_slice) == 1, f"a 4x4 gang spans {first_nodes}"
    (first_slice,) = first_slice
    victim = cluster.rank(status, 1)
    node = victim.get("node_id")
    orphan = rank_process(victim)
    agent_pid = int((cluster.state / "nodes" / node / "agent.pid").read_text().split()[0])
    assert node in cmdline(agent_pid) and str(cluster.state) in cmdline(agent_pid), \
        f"pid {agent_pid} is not {node}'s agent: {cmdline(agent_pid)!r}"
    os.kill(agent_pid, signal.SIGKILL)
    killed_at = time.monotonic()

    try:
        rc = client.wait(timeout=150)
    finally:
        # A rank whose agent was killed is nobody's child: end it if the gang's end did not.
        if pid_alive(orphan) and "ddp_train.py" in cmdline(orphan):
            print(f"rank 1 (pid {orphan}, state {process_state(orphan)}) outlived its agent")
            os.kill(orphan, signal.SIGKILL)
    out, err = client.stdout(), client.stderr()
    assert rc == 0, f"tessera train exited {rc}:\n{out[-4000:]}\n{err[-4000:]}"
    status = cluster.status(job_id)
    print(f"agent kill to success: {time.monotonic() - killed_at:.1f}s; "
          f"last_restart_ms {status.get('last_restart_ms')}")
    assert status.get("state") == "SUCCEEDED" and num(status.get("restart_count")) == 1, status
    final_nodes = sorted(r.get("node_id") for r in status["ranks"])
    other = "v6e-1" if first_slice == "v6e-0" else "v6e-0"
    assert final_nodes == [f"{other}-w{i}" for i in range(4)], \
        f"after losing {node} the gang ran on {final_nodes}, not on slice {other}"
    sums = checksums(out)
    assert sorted(sums) == [0, 1, 2, 3] and len(set(sums.values())) == 1, sums
    assert_same_parameters(torch_module, output, reference)


# ----------------------------------------------------------------------------------------------
# h. A foreground train forwards its stdin to rank 0 (and only there); /dev/null is not forwarded.

def test_stdin_reaches_rank_zero(make_cluster):
    cluster = make_cluster(ONE_SLICE)
    script = 'if [ "$RANK" = 0 ]; then cat; else echo "rank $RANK read [$(cat)]"; fi'
    r = subprocess.run([str(cluster.tessera), "train", "--workers", "2", "--", "sh", "-c", script],
                       input="first line\nsecond line\n", capture_output=True, text=True,
                       timeout=60, cwd=cluster.work, env=cluster.env)
    assert r.returncode == 0, f"exit {r.returncode}:\n{r.stdout}\n{r.stderr}"
    lines = rank_lines(r.stdout)
    assert (0, "first line") in lines and (0, "second line") in lines, r.stdout
    assert (1, "rank 1 read []") in lines, r.stdout  # the others read an empty stdin
    # --no-stdin: rank 0 reads nothing either.
    r = subprocess.run([str(cluster.tessera), "train", "--workers", "1", "--no-stdin", "--", "sh",
                        "-c", 'echo "read [$(cat)]"'], input="ignored\n", capture_output=True,
                       text=True, timeout=60, cwd=cluster.work, env=cluster.env)
    assert r.returncode == 0, f"exit {r.returncode}:\n{r.stdout}\n{r.stderr}"
    assert (0, "read []") in rank_lines(r.stdout), r.stdout


# ----------------------------------------------------------------------------------------------
# i. --working-dir ships a folder to every host that runs a rank; the ranks start in their copy.

def test_working_dir_reaches_every_rank(make_cluster, tmp_path):
    cluster = make_cluster(ONE_SLICE)
    code = tmp_path / "code"
    (code / "pkg").mkdir(parents=True)
    (code / "pkg" / "__init__.py").write_text("WHAT = 'shipped'\n")
    (code / "main.py").write_text(
        "import os, pkg\nprint(pkg.WHAT, os.environ['RANK'], os.getcwd())\n")
    r = cluster.cli("train", "--accelerator", "TPU-V6E", "--topology", "4x4", "--working-dir",
                    code, "--", PYTHON, "main.py", timeout=90)
    assert r.returncode == 0, f"exit {r.returncode}:\n{r.stdout}\n{r.stderr}"
    seen = {}
    for rank, line in rank_lines(r.stdout):
        what, rank_env, cwd = line.split(" ", 2)
        assert what == "shipped" and int(rank_env) == rank, line
        seen[rank] = cwd
    assert sorted(seen) == [0, 1, 2, 3], r.stdout
    # Each rank ran in its own host's copy, under that node's folder, not in the source folder.
    for rank, cwd in seen.items():
        assert cwd.startswith(str(cluster.state / "nodes")) and "/jobs/job-" in cwd, cwd
    assert len(set(seen.values())) == 4, seen


# ----------------------------------------------------------------------------------------------
# j. A `tessera run` client killed with SIGKILL: its agent stops the worker it no longer watches.

def test_killed_run_client_stops_its_worker(make_cluster):
    cluster = make_cluster(ONE_SLICE)
    client = cluster.start("run", "--", "sh", "-c", "echo up; exec sleep 600", log_name="run")
    wait_for(lambda: "up" in client.stdout(), 30, "the run worker to start")
    running = [w for w in _workers(cluster) if w.get("state") == "RUNNING"]
    assert len(running) == 1, running
    pid = num(running[0].get("pid"))
    assert pid_alive(pid), running
    os.kill(client.pid, signal.SIGKILL)
    client.wait(timeout=10)
    wait_for(lambda: not pid_alive(pid), 20, f"the unwatched worker (pid {pid}) to be stopped")
    worker = next(w for w in _workers(cluster) if num(w.get("pid")) == pid)
    assert "owner stopped watching" in worker.get("exit", {}).get("reason", ""), worker

