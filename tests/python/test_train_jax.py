"""tessera.train.jax.JaxTrainer on the C++ gang controller, against a simulated TPU v6e 4x4 slice
(tests/train/one_slice.yaml: 4 hosts) and a CPU node.

JAX cannot be installed on the machines that run these tests, so the ranks import a stand-in
`jax` (tests/python/fake_jax: jax.distributed.initialize checks its arguments as JAX does and
records every call, in order, with JAX_PLATFORMS as it was then). The stand-in is on the path
of this test's driver, and so of its workers; the driver of the missing-jax test has none.

- On the slice (4 ranks): JAX_PLATFORMS=tpu before jax is imported, and
  jax.distributed.initialize called once per rank before the loop, with rank 0's host and a
  port of the gang's as the coordinator, the rank count and the rank; the loop's reports and
  checkpoints (a checkpoint that only rank 1 passes is registered) make the Result.
- A rank that SIGKILLs itself with FailureConfig(max_failures=1): the group restarts, every
  rank initializes again in its new process and resumes from the latest checkpoint.
- A rank that raises without failures left: TrainingFailedError naming it, with its exception.
- CPU (use_tpu=False, num_workers=2): no JAX distributed system, as in Ray; reports still sync.
- No jax in the workers: a one-line ModuleNotFoundError naming the package.
- The backend in this process (world size 1): the user's JAX_PLATFORMS wins, cuda gets the
  rank's own GPUs as local_device_ids, shutdown after the loop; report()'s all-reduce through
  rank 0 turns away a stranger's connection.
- Config errors: Ray's ValueErrors.
"""
import json
import os
import signal
import socket
import sys
import tempfile
import textwrap
import threading
from pathlib import Path

import pytest

import tessera
from tessera import train
from tessera.train import _backend
from tessera.train.jax import JaxConfig, JaxTrainer, _JaxBackend
from conftest import rank_records, train_run_config

HERE = Path(__file__).resolve().parent
FAKE_JAX = str(HERE / "fake_jax")
ONE_SLICE = HERE.parent / "train" / "one_slice.yaml"
SLICE = dict(use_tpu=True, topology="4x4", accelerator_type="TPU-V6E")
STEPS = 6
CHECKPOINT_EVERY = 2


def _forget_jax():
    for name in [n for n in sys.modules if n == "jax" or n.startswith("jax.")]:
        del sys.modules[name]


@pytest.fixture(scope="module")
def slice_cluster(make_cluster):
    # On the driver's sys.path before init: the workers get the driver's path.
    sys.path.insert(0, FAKE_JAX)
    made = make_cluster(ONE_SLICE, "--object-store-memory", "16MiB")
    tessera.init(_state_dir=str(made.state))
    yield made
    tessera.shutdown()
    sys.path.remove(FAKE_JAX)


@pytest.fixture
def fake_jax(monkeypatch):
    """The stand-in importable in this process, fresh, with a world of one rank."""
    monkeypatch.syspath_prepend(FAKE_JAX)
    monkeypatch.delenv("JAX_PLATFORMS", raising=False)
    for name, value in {"RANK": "0", "WORLD_SIZE": "1", "JAX_COORDINATOR_ADDRESS": "10.0.0.2:8476",
                        "JAX_NUM_PROCESSES": "1", "JAX_PROCESS_ID": "0"}.items():
        monkeypatch.setenv(name, value)
    _forget_jax()
    yield
    _forget_jax()


# ----------------------------------------------------------------------------------------------
# The training function (runs inside each rank's actor; imported there from this module).


def jax_loop(config):
    import jax

    context = train.get_context()
    rank, world = context.get_world_rank(), context.get_world_size()
    attempt = os.environ["TORCHELASTIC_RESTART_COUNT"]
    calls_before_the_loop = [dict(c) for c in jax.distributed.calls]
    start = 0
    checkpoint = train.get_checkpoint()
    if checkpoint is not None:
        with checkpoint.as_directory() as folder:
            start = json.loads(Path(folder, "state.json").read_text())["step"]
    Path(config["out"], f"rank{rank}-attempt{attempt}.json").write_text(json.dumps({
        "rank": rank, "world": world, "local_rank": context.get_local_rank(),
        "node_rank": context.get_node_rank(), "experiment": context.get_experiment_name(),
        "start_step": start, "calls": calls_before_the_loop,
        "platforms_at_import": jax.platforms_at_import,
        "process": [jax.process_index(), jax.process_count()],
        "node_id": tessera.get_runtime_context().get_node_id(),
        "env": {k: os.environ.get(k) for k in (
            "JAX_COORDINATOR_ADDRESS", "JAX_NUM_PROCESSES", "JAX_PROCESS_ID", "JAX_PLATFORMS",
            "MASTER_ADDR", "MASTER_PORT", "TPU_WORKER_ID", "TPU_TOPOLOGY")}}))
    for step in range(start, config["steps"]):
        if rank == config.get("kill_rank") and step == config["kill_step"] and attempt == "0":
            os.kill(os.getpid(), signal.SIGKILL)
        if rank == config.get("raise_rank") and step == config["raise_step"]:
            raise KeyError(f"rank {rank} failed on purpose at step {step}")
        done = step + 1
        saved = None
        # Only rank 1 passes the checkpoint: it registers only if report() all-reduces the flag.
        if rank == 1 and done % config["every"] == 0:
            folder = tempfile.mkdtemp(prefix="tessera-test-jax-ckpt-")
            Path(folder, "state.json").write_text(json.dumps({"step": done, "rank": rank}))
            saved = train.Checkpoint.from_directory(folder)
        train.report({"step": done, "rank": rank, "process_index": jax.process_index()},
                     checkpoint=saved)


def run_jax(tmp, name, scaling=None, max_failures=0, num_to_keep=2, **loop_options):
    out = tmp / f"{name}-out"
    out.mkdir()
    trainer = JaxTrainer(
        jax_loop,
        train_loop_config={"steps": STEPS, "every": CHECKPOINT_EVERY, "out": str(out),
                           **loop_options},
        scaling_config=scaling or train.ScalingConfig(**SLICE),
        run_config=train_run_config(tmp, name, max_failures, num_to_keep))
    return trainer, out


def assert_initialized_once_before_the_loop(record, world):
    env = record["env"]
    assert record["calls"] == [{
        "call": "initialize", "coordinator_address": env["JAX_COORDINATOR_ADDRESS"],
        "num_processes": world, "process_id": record["rank"], "local_device_ids": None,
        "jax_platforms": "tpu"}], record
    assert record["platforms_at_import"] == "tpu"
    assert record["process"] == [record["rank"], world]


def report_lines(result):
    return [json.loads(line) for line in
            (Path(result.path) / "result.jsonl").read_text().splitlines()]


# ----------------------------------------------------------------------------------------------
# On the slice.


def test_each_rank_initializes_jax_with_the_slice_coordinator_before_the_loop(
        slice_cluster, tmp_path):
    trainer, out = run_jax(tmp_path, "slice")
    result = trainer.fit()
    records = rank_records(out)
    assert sorted(records) == [f"rank{r}-attempt0" for r in range(4)], sorted(records)
    coordinators = set()
    for r in range(4):
        record = records[f"rank{r}-attempt0"]
        assert (record["rank"], record["world"], record["local_rank"]) == (r, 4, 0)
        assert record["experiment"] == "slice" and record["start_step"] == 0
        assert_initialized_once_before_the_loop(record, 4)
        # One rank per slice host, with its TPU environment.
        assert record["node_id"] == f"v6e-0-w{record['env']['TPU_WORKER_ID']}", record
        assert record["env"]["TPU_TOPOLOGY"] == "4x4"
        coordinators.add(record["calls"][0]["coordinator_address"])
    # One coordinator: rank 0's host, on a port of its own (not torch's MASTER_PORT).
    assert len(coordinators) == 1, coordinators
    host, port = coordinators.pop().rsplit(":", 1)
    rank0 = records["rank0-attempt0"]["env"]
    assert host == rank0["MASTER_ADDR"] and port != rank0["MASTER_PORT"], (host, port, rank0)
    assert sorted(r["node_id"] for r in records.values()) == [f"v6e-0-w{i}" for i in range(4)]

    # Rank 0's last report; rank 1's checkpoints (steps 2, 4, 6), the newest 2 kept.
    assert result.error is None
    assert result.metrics == {"step": STEPS, "rank": 0, "process_index": 0}
    assert [line["metrics"]["step"] for line in report_lines(result)] == list(range(1, STEPS + 1))
    kept = sorted(p.name for p in Path(result.path).glob("checkpoint_*"))
    assert kept == ["checkpoint_000001", "checkpoint_000002"], kept
    state = json.loads((Path(result.checkpoint.path) / "state.json").read_text())
    assert state == {"step": STEPS, "rank": 1}


def test_a_killed_rank_restarts_the_group_which_initializes_again_and_resumes(
        slice_cluster, tmp_path):
    trainer, out = run_jax(tmp_path, "restarted", max_failures=1, kill_rank=2, kill_step=3)
    result = trainer.fit()
    records = rank_records(out)
    assert sorted(records) == sorted(f"rank{r}-attempt{a}" for r in range(4) for a in (0, 1))
    for r in range(4):
        assert records[f"rank{r}-attempt0"]["start_step"] == 0
        # Steps 1-2 and their checkpoint were reported before rank 2 died at step 3.
        assert records[f"rank{r}-attempt1"]["start_step"] == 2, records[f"rank{r}-attempt1"]
        for attempt in (0, 1):
            assert_initialized_once_before_the_loop(records[f"rank{r}-attempt{attempt}"], 4)
    assert result.metrics == {"step": STEPS, "rank": 0, "process_index": 0}
    lines = report_lines(result)
    assert {line["attempt"] for line in lines} == {0, 1}
    assert [line["metrics"]["step"] for line in lines if line["attempt"] == 1] == \
        list(range(3, STEPS + 1))


def test_a_rank_that_raises_without_failures_left_fails_the_fit_naming_it(
        slice_cluster, tmp_path):
    trainer, out = run_jax(tmp_path, "raises", raise_rank=1, raise_step=1)
    with pytest.raises(train.TrainingFailedError) as info:
        trainer.fit()
    error = info.value
    assert isinstance(error, train.WorkerGroupError)
    failed = error.worker_failures.get(1)
    assert isinstance(failed, KeyError), error.worker_failures
    assert "rank 1 failed on purpose at step 1" in str(failed)
    assert "[Rank 1 on node v6e-0-w" in str(error), str(error)
    assert not any(name.endswith("attempt1") for name in rank_records(out))


def test_num_workers_not_matching_the_slice_hosts_is_a_value_error(slice_cluster, tmp_path):
    trainer = JaxTrainer(
        jax_loop, scaling_config=train.ScalingConfig(num_workers=8, **SLICE),
        run_config=train.RunConfig(name="mismatch", storage_path=str(tmp_path)))
    with pytest.raises(ValueError, match=r"num_workers=8\) does not match .* 4 hosts"):
        trainer.fit()


# ----------------------------------------------------------------------------------------------
# On the CPU.


def test_cpu_jax_runs_num_workers_ranks_without_a_distributed_system(slice_cluster, tmp_path):
    trainer, out = run_jax(tmp_path, "cpu", scaling=train.ScalingConfig(
        num_workers=2, label_selector={"tessera.io/accelerator-type": "!TPU-V6E"}))
    result = trainer.fit()
    records = rank_records(out)
    assert sorted(records) == ["rank0-attempt0", "rank1-attempt0"]
    for r in range(2):
        record = records[f"rank{r}-attempt0"]
        assert (record["rank"], record["world"], record["local_rank"]) == (r, 2, r)
        assert record["node_id"] == "cpu-0"
        # As in Ray: JAX_PLATFORMS left alone and no jax.distributed.initialize on the CPU; the
        # coordinator is in the environment for a loop that wants one.
        assert record["calls"] == [] and record["platforms_at_import"] is None, record
        assert record["env"]["JAX_NUM_PROCESSES"] == "2"
        assert record["env"]["JAX_PROCESS_ID"] == str(r)
    assert result.metrics == {"step": STEPS, "rank": 0, "process_index": 0}
    state = json.loads((Path(result.checkpoint.path) / "state.json").read_text())
    assert state == {"step": STEPS, "rank": 1}


def test_workers_without_jax_fail_with_one_line_naming_it(slice_cluster, tmp_path):
    # A driver whose path (and so its workers') has no stand-in jax.
    script = textwrap.dedent(f"""
        import json, sys
        assert not any("fake_jax" in p for p in sys.path)
        import tessera
        from tessera import train
        from tessera.train.jax import JaxTrainer

        def loop():
            pass

        tessera.init()
        trainer = JaxTrainer(loop, scaling_config=train.ScalingConfig(
                                 num_workers=1, label_selector={{"tessera.io/accelerator-type":
                                                                 "!TPU-V6E"}}),
                             run_config=train.RunConfig(name="nojax",
                                                        storage_path={str(tmp_path)!r}))
        try:
            trainer.fit()
        except train.TrainingFailedError as e:
            failure = e.worker_failures[0]
            print(json.dumps([isinstance(failure, ImportError), str(failure)]))
        """)
    done = slice_cluster.python(script, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    is_import_error, message = json.loads(done.stdout.strip().splitlines()[-1])
    assert is_import_error, message
    # The rank's traceback, then its error in one line (as Ray shows a worker's exception).
    last = message.strip().splitlines()[-1]
    assert last.startswith("ModuleNotFoundError: JaxTrainer needs the 'jax' package in every "
                           "training worker, and the worker on cpu-0 has no module named "
                           "'jax': install jax"), message


# ----------------------------------------------------------------------------------------------
# The backend in this process.


def test_tpu_sets_jax_platforms_before_import_and_initializes_then_shuts_down(fake_jax):
    backend = _JaxBackend(JaxConfig(use_tpu=True), use_gpu=False)
    backend.on_start()
    import jax

    assert os.environ["JAX_PLATFORMS"] == "tpu" and jax.platforms_at_import == "tpu"
    assert jax.distributed.calls == [{
        "call": "initialize", "coordinator_address": "10.0.0.2:8476", "num_processes": 1,
        "process_id": 0, "local_device_ids": None, "jax_platforms": "tpu"}]
    backend.barrier()  # a world of one: nothing to wait for
    backend.on_shutdown()
    assert [c["call"] for c in jax.distributed.calls] == ["initialize", "shutdown"]


def test_the_users_jax_platforms_wins(fake_jax, monkeypatch):
    monkeypatch.setenv("JAX_PLATFORMS", "cpu")
    backend = _JaxBackend(JaxConfig(use_tpu=True), use_gpu=False)
    backend.on_start()
    backend.on_shutdown()
    import jax

    assert os.environ["JAX_PLATFORMS"] == "cpu" and jax.distributed.calls == []


def test_gpu_initializes_with_the_ranks_own_gpus_inside_the_mask(fake_jax, monkeypatch):
    import tessera.runtime_context

    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "2,3")
    monkeypatch.setattr(tessera.runtime_context, "get_gpu_ids", lambda: [3])
    backend = _JaxBackend(JaxConfig(use_gpu=True), use_gpu=True)
    backend.on_start()
    backend.on_shutdown()
    import jax

    assert os.environ["JAX_PLATFORMS"] == "cuda"
    assert jax.distributed.calls[0]["local_device_ids"] == [1], jax.distributed.calls


def test_missing_jax_is_a_module_not_found_error_in_one_line(fake_jax, monkeypatch):
    monkeypatch.setitem(sys.modules, "jax", None)  # `import jax` fails, as where none is
    monkeypatch.setenv("TESSERA_NODE_ID", "v6e-0-w1")
    with pytest.raises(ModuleNotFoundError) as info:
        _JaxBackend(JaxConfig(use_tpu=True), use_gpu=False).on_start()
    assert info.value.name == "jax"
    assert "\n" not in str(info.value)
    assert "the worker on v6e-0-w1 has no module named 'jax'" in str(info.value)


def test_the_report_all_reduce_goes_through_rank_0_and_turns_strangers_away():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    base = {"WORLD_SIZE": "3", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port),
            "TORCHELASTIC_RUN_ID": "job-1", "TORCHELASTIC_RESTART_COUNT": "2"}
    results, errors = {}, []

    def rank(r, values):
        try:
            rendezvous = _backend._Rendezvous(dict(base, RANK=str(r)), timeout_s=30)
            results[r] = [rendezvous.all_reduce_max(v) for v in values]
            rendezvous.close()
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(e)

    def stranger():
        """An earlier attempt's rank 1 (restart count 1) on the same port: rank 0 hangs up."""
        for _ in range(500):
            try:
                conn = socket.create_connection(("127.0.0.1", port), timeout=5)
                break
            except OSError:  # rank 0 does not listen yet
                threading.Event().wait(0.02)
        with conn:
            conn.sendall(b"tessera-train job-1 1 1\n")
            return conn.recv(1)

    first = threading.Thread(target=rank, args=(0, [0, 5, 0]))
    first.start()
    assert stranger() == b""
    others = [threading.Thread(target=rank, args=(r, v)) for r, v in ((1, [1, 2, 0]),
                                                                       (2, [0, 7, 0]))]
    for t in others:
        t.start()
    for t in [first] + others:
        t.join(60)
    assert not errors, errors
    assert results == {r: [1, 7, 0] for r in range(3)}, results


# ----------------------------------------------------------------------------------------------
# Errors before anything runs.


@pytest.mark.parametrize("kwargs, message", [
    (dict(use_tpu=True, resources_per_worker={"CPU": 1}),
     "`use_tpu` is True but `TPU` is set to 0 in `resources_per_worker`"),
    (dict(resources_per_worker={"TPU": 4}), "`use_tpu` is False but `TPU` was found"),
])
def test_tpu_resources_and_use_tpu_must_agree(kwargs, message):
    # The other ScalingConfig checks are the trainers' shared ones (test_train_torch.py).
    with pytest.raises(ValueError, match=message):
        train.ScalingConfig(**kwargs)


def test_jax_trainer_arguments():
    tpu = JaxTrainer(lambda: None, scaling_config=train.ScalingConfig(**SLICE))
    assert tpu._backend_config == JaxConfig(use_tpu=True, use_gpu=False)
    assert JaxTrainer(lambda: None)._backend_config == JaxConfig(use_tpu=False, use_gpu=False)
    with pytest.raises(ValueError, match="should take in 0 or 1 arguments"):
        JaxTrainer(lambda a, b: None)
    with pytest.raises(ValueError, match="jax_config must be a JaxConfig"):
        JaxTrainer(lambda: None, jax_config={"use_tpu": True})
    with pytest.raises(TypeError):
        JaxTrainer(lambda: None, metadata={})  # not one of Ray's JaxTrainer arguments
