"""Timelines and the event stream on a two-node simulated cluster: the runs of a driver's tasks
and actor calls come back from `tessera.timeline()` and `tessera timeline JOB -o FILE` as Chrome
trace events (spans on their node's and worker's rows, failures coloured, the job named), and
`tessera events` shows the nodes joining and the cluster's changes as they happen."""
import json

import pytest

import tessera


@tessera.remote
def square(x):
    return x * x


@tessera.remote
def fail():
    raise ValueError("on purpose")


@tessera.remote
class Counter:
    def __init__(self):
        self.n = 0

    def add(self, k):
        self.n += k
        return self.n


def spans(events):
    return [e for e in events if e["ph"] == "X"]


def row_names(events):
    """(pid, tid) -> thread name, and pid -> process name, from the metadata events."""
    threads, processes = {}, {}
    for e in events:
        if e["ph"] != "M":
            continue
        if e["name"] == "thread_name":
            threads[(e["pid"], e["tid"])] = e["args"]["name"]
        elif e["name"] == "process_name":
            processes[e["pid"]] = e["args"]["name"]
    return threads, processes


def test_a_drivers_runs_come_back_as_a_chrome_trace(cluster):
    assert tessera.get([square.remote(i) for i in range(20)]) == [i * i for i in range(20)]
    with pytest.raises(ValueError):
        tessera.get(fail.remote())
    counter = Counter.remote()
    assert tessera.get([counter.add.remote(1) for _ in range(3)]) == [1, 2, 3]

    events = tessera.timeline()
    runs = spans(events)
    by_cat = {}
    for e in runs:
        by_cat.setdefault(e["cat"], []).append(e)
    assert len([e for e in by_cat["task"] if e["name"] == "square"]) == 20
    assert len(by_cat["actor_create"]) == 1
    assert len(by_cat["actor_call"]) == 3
    failed = [e for e in by_cat["task"] if e["name"] == "fail"]
    assert len(failed) == 1
    assert failed[0]["cname"] == "terrible"
    assert failed[0]["args"]["outcome"] == "error: ValueError"
    job = tessera.get_runtime_context().get_job_id()
    threads, processes = row_names(events)
    node_ids = {n["NodeID"] for n in tessera.nodes()}
    for e in runs:
        assert e["args"]["job_id"] == job
        assert e["dur"] >= 0 and e["ts"] > 1.6e15  # Unix microseconds
        assert processes[e["pid"]].removeprefix("Node ") in node_ids
        assert threads[(e["pid"], e["tid"])].startswith("worker ")
    # The actor's calls run on the row of its one worker.
    assert len({(e["pid"], e["tid"]) for e in by_cat["actor_call"]}) == 1


def test_a_driver_can_leave_its_runs_out_of_timelines(cluster):
    tessera.shutdown()
    tessera.init(_state_dir=str(cluster.state), _record_task_events=False)
    assert tessera.get([square.remote(i) for i in range(5)]) == [i * i for i in range(5)]
    assert spans(tessera.timeline()) == []
    tessera.shutdown()
    tessera.init(_state_dir=str(cluster.state))  # as the fixture left it
    assert tessera.get(square.remote(2)) == 4
    assert [e["name"] for e in spans(tessera.timeline())] == ["square"]


def test_the_cli_writes_the_same_timeline_to_a_file(cluster, tmp_path):
    assert tessera.get(square.remote(3)) == 9
    expected = len(spans(tessera.timeline()))  # also sends what was not reported yet
    job = tessera.get_runtime_context().get_job_id()
    out = tmp_path / "trace.json"
    r = cluster.cli("timeline", job, "-o", str(out))
    assert r.returncode == 0, r.stderr
    assert f"of job {job} written to {out}" in r.stderr
    assert oct(out.stat().st_mode & 0o777) == "0o644"
    trace = json.loads(out.read_text())
    assert trace["displayTimeUnit"] == "ms"
    assert trace["otherData"]["job_id"] == job
    assert len(spans(trace["traceEvents"])) == expected
    # To standard output, and with no job named: the last job that reported.
    r = cluster.cli("timeline", "-o", "-")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["otherData"]["job_id"] == job


def test_a_job_nobody_knows_is_a_one_line_error(cluster):
    r = cluster.cli("timeline", "job-does-not-exist", "-o", "-")
    assert r.returncode == 1
    assert r.stdout == ""
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1
    assert "no job job-does-not-exist is known to the head" in lines[0]


def test_events_show_nodes_joining_and_marks_notices(cluster):
    r = cluster.cli("events", "--json")
    assert r.returncode == 0, r.stderr
    events = [json.loads(line) for line in r.stdout.splitlines()]
    joined = [e for e in events if e["kind"] == "node" and " joined (agent at " in e["message"]]
    assert len(joined) == len(cluster.node_ids())
    assert all(e["notice"] is False for e in joined)
    seqs = [e["seq"] for e in events]
    assert seqs == sorted(seqs)
    # A placement group made and removed is in the stream, in order.
    from tessera.util import placement_group, remove_placement_group
    pg = placement_group([{"CPU": 1}], strategy="PACK", name="timeline-pg")
    tessera.get(pg.ready(), timeout=60)
    remove_placement_group(pg)
    r = cluster.cli("events", "--after", str(seqs[-1]))
    assert r.returncode == 0, r.stderr
    text = r.stdout
    assert "placement group timeline-pg created: 1 bundles, PACK" in text
    assert "placement group timeline-pg held: 1 bundles on 1 nodes" in text
    assert "placement group timeline-pg removed" in text
    assert text.index("created") < text.index("held") < text.index("removed")
