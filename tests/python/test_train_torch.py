"""tessera.train.torch.TorchTrainer on the C++ gang controller (_core.run_actor_gang), against a
simulated TPU v6e 4x4 slice (tests/train/one_slice.yaml: 4 hosts) and a CPU node.

- A DDP run on the slice (4 ranks, gloo on CPU): every rank on its own slice host with its
  torchrun and TPU environment; Result.metrics is rank 0's last report; the checkpoints kept are
  the newest num_to_keep.
- A rank that SIGKILLs itself mid-run with FailureConfig(max_failures=1): the gang restarts from
  the latest checkpoint and ends with exactly the parameters of the uninterrupted run.
- The same with max_failures=0: fit raises TrainingFailedError naming the rank.
- get_context and prepare_data_loader/prepare_model on 2 placement-group workers that a
  label selector puts on the CPU node.
- Config errors: Ray's ValueErrors, before anything starts.

Tiny model and few steps: each run takes seconds.
"""
import json
import os
import signal
import tempfile
from pathlib import Path

import pytest

import tessera
from tessera import _core, train
from tessera.train.torch import TorchTrainer
from conftest import rank_records, train_run_config

torch = pytest.importorskip("torch")

ONE_SLICE = Path(__file__).resolve().parents[1] / "train" / "one_slice.yaml"
SLICE = dict(use_tpu=True, topology="4x4", accelerator_type="TPU-V6E")
STEPS = 12
CHECKPOINT_EVERY = 4
SEED = 1234


@pytest.fixture(scope="module")
def slice_cluster(make_cluster):
    made = make_cluster(ONE_SLICE, "--object-store-memory", "16MiB")
    tessera.init(_state_dir=str(made.state))
    yield made
    tessera.shutdown()


# ----------------------------------------------------------------------------------------------
# The training function (runs inside each rank's actor; imported there from this module).


def _data(seed, samples=256, features=8):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(samples, features, generator=g)
    y = torch.tanh(x @ torch.randn(features, 1, generator=g))
    return x, y


def _batch(x, y, step, rank, world, size=8):
    idx = (torch.arange(size) + (step * world + rank) * size) % x.shape[0]
    return x[idx], y[idx]


def ddp_loop(config):
    from torch import nn
    from tessera.train.torch import get_device, prepare_model

    torch.set_num_threads(1)
    context = train.get_context()
    rank, world = context.get_world_rank(), context.get_world_size()
    attempt = os.environ["TORCHELASTIC_RESTART_COUNT"]
    torch.manual_seed(config["seed"])
    model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 1))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    start = 0
    checkpoint = train.get_checkpoint()
    if checkpoint is not None:
        with checkpoint.as_directory() as folder:
            state = torch.load(os.path.join(folder, "state.pt"))
        model.load_state_dict(state["model"])
        optimizer.load_state_dict(state["optimizer"])
        start = state["step"]
    out = Path(config["out"])
    (out / f"rank{rank}-attempt{attempt}.json").write_text(json.dumps({
        "rank": rank, "world": world, "local_rank": context.get_local_rank(),
        "local_world": context.get_local_world_size(), "node_rank": context.get_node_rank(),
        "experiment": context.get_experiment_name(), "start_step": start,
        "node_id": tessera.get_runtime_context().get_node_id(), "device": str(get_device()),
        "env": {k: os.environ.get(k) for k in ("RANK", "WORLD_SIZE", "TPU_WORKER_ID",
                                               "TPU_ACCELERATOR_TYPE", "TPU_TOPOLOGY",
                                               "MASTER_ADDR", "MASTER_PORT")}}))
    ddp = prepare_model(model)
    x, y = _data(config["seed"])
    # One throwaway backward pass fixes DDP's gradient bucket order, so a resumed run sums in
    # the same order as a fresh one (examples/train/ddp_train.py explains).
    ddp(_batch(x, y, 0, rank, world)[0]).sum().backward()
    optimizer.zero_grad(set_to_none=True)
    for step in range(start, config["steps"]):
        if rank == config.get("kill_rank") and step == config["kill_step"] and attempt == "0":
            os.kill(os.getpid(), signal.SIGKILL)
        bx, by = _batch(x, y, step, rank, world)
        optimizer.zero_grad(set_to_none=True)
        loss = nn.functional.mse_loss(ddp(bx), by)
        loss.backward()
        optimizer.step()
        done = step + 1
        saved = None
        if rank == 0 and done % config["every"] == 0:
            folder = tempfile.mkdtemp(prefix="tessera-test-ckpt-")
            torch.save({"step": done, "model": model.state_dict(),
                        "optimizer": optimizer.state_dict()}, os.path.join(folder, "state.pt"))
            saved = train.Checkpoint.from_directory(folder)
        train.report({"step": done, "loss": loss.item(), "rank": rank}, checkpoint=saved)
    if rank == 0:
        torch.save(model.state_dict(), out / "final.pt")


def run_ddp(tmp, name, max_failures=0, kill_rank=None, kill_step=None, num_to_keep=2):
    out = tmp / f"{name}-out"
    out.mkdir()
    trainer = TorchTrainer(
        ddp_loop,
        train_loop_config={"seed": SEED, "steps": STEPS, "every": CHECKPOINT_EVERY, "out": str(out),
                           "kill_rank": kill_rank, "kill_step": kill_step},
        scaling_config=train.ScalingConfig(**SLICE),
        run_config=train_run_config(tmp, name, max_failures, num_to_keep))
    return trainer, out


def assert_same_parameters(path_a, path_b):
    a, b = torch.load(path_a), torch.load(path_b)
    assert list(a) == list(b)
    different = [k for k in a if not torch.equal(a[k], b[k])]
    assert not different, f"{path_a} and {path_b} differ in {different}"


@pytest.fixture(scope="module")
def uninterrupted(slice_cluster, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("uninterrupted")
    trainer, out = run_ddp(tmp, "uninterrupted")
    return trainer.fit(), out


# ----------------------------------------------------------------------------------------------
# a. DDP on the slice.


def test_ddp_on_a_slice_runs_one_rank_per_host_with_the_torch_and_tpu_env(uninterrupted):
    result, out = uninterrupted
    records = rank_records(out)
    assert sorted(records) == [f"rank{r}-attempt0" for r in range(4)], sorted(records)
    nodes = []
    for r in range(4):
        record = records[f"rank{r}-attempt0"]
        assert (record["rank"], record["world"]) == (r, 4)
        assert record["env"]["RANK"] == str(r) and record["env"]["WORLD_SIZE"] == "4"
        assert (record["local_rank"], record["local_world"]) == (0, 1)  # one rank per host
        assert record["experiment"] == "uninterrupted"
        assert record["start_step"] == 0
        assert record["device"] == "cpu"
        # The rank's host is a slice host, and its TPU environment names that host.
        assert record["node_id"].startswith("v6e-0-w"), record
        assert record["env"]["TPU_WORKER_ID"] == record["node_id"].rsplit("w", 1)[1]
        assert record["env"]["TPU_ACCELERATOR_TYPE"] == "v6e-16"
        assert record["env"]["TPU_TOPOLOGY"] == "4x4"
        nodes.append(record["node_id"])
    assert sorted(nodes) == [f"v6e-0-w{i}" for i in range(4)]
    assert len({(r["env"]["MASTER_ADDR"], r["env"]["MASTER_PORT"]) for r in records.values()}) == 1

    # Rank 0's last report; the newest num_to_keep=2 of the 3 checkpoints (steps 4, 8, 12).
    assert result.error is None
    assert result.metrics["step"] == STEPS and result.metrics["rank"] == 0
    run_dir = Path(result.path)
    kept = sorted(p.name for p in run_dir.glob("checkpoint_*"))
    assert kept == ["checkpoint_000001", "checkpoint_000002"], kept
    assert result.checkpoint.path == str(run_dir / "checkpoint_000002")
    assert torch.load(Path(result.checkpoint.path) / "state.pt")["step"] == STEPS
    assert [c.path for c, _ in result.best_checkpoints] == [str(run_dir / n) for n in kept]
    lines = [json.loads(line) for line in (run_dir / "result.jsonl").read_text().splitlines()]
    assert [line["metrics"]["step"] for line in lines] == list(range(1, STEPS + 1))
    assert (out / "final.pt").exists()


# ----------------------------------------------------------------------------------------------
# b, c. A rank killed mid-run.


def test_a_killed_rank_restarts_the_gang_from_the_checkpoint_and_ends_identical(
        uninterrupted, tmp_path):
    _, reference_out = uninterrupted
    kill_step = 6  # the last checkpoint before it is step 4
    trainer, out = run_ddp(tmp_path, "restarted", max_failures=1, kill_rank=2,
                           kill_step=kill_step)
    result = trainer.fit()
    records = rank_records(out)
    assert sorted(records) == sorted([f"rank{r}-attempt{a}" for r in range(4) for a in (0, 1)])
    for r in range(4):
        assert records[f"rank{r}-attempt0"]["start_step"] == 0
        assert records[f"rank{r}-attempt1"]["start_step"] == 4, records[f"rank{r}-attempt1"]
    assert result.metrics["step"] == STEPS and result.metrics["rank"] == 0
    lines = [json.loads(line) for line in
             (Path(result.path) / "result.jsonl").read_text().splitlines()]
    assert {line["attempt"] for line in lines} == {0, 1}
    assert max(line["metrics"]["step"] for line in lines if line["attempt"] == 0) == kill_step
    assert_same_parameters(out / "final.pt", reference_out / "final.pt")


def test_a_killed_rank_without_failures_left_fails_the_fit_naming_it(slice_cluster, tmp_path):
    trainer, out = run_ddp(tmp_path, "fails", max_failures=0, kill_rank=2, kill_step=3)
    with pytest.raises(train.TrainingFailedError) as info:
        trainer.fit()
    error = info.value
    assert isinstance(error, train.WorkerGroupError)
    # Rank 2's process died; the others may have failed too, as their collectives lost it.
    died = error.worker_failures.get(2)
    assert isinstance(died, tessera.exceptions.ActorDiedError), error.worker_failures
    assert "SIGKILL" in str(died), str(died)
    assert "[Rank 2 on node v6e-0-w2]" in str(error), str(error)
    for rank, failure in error.worker_failures.items():
        assert rank == 2 or isinstance(failure, RuntimeError), (rank, failure)
    assert not (out / "final.pt").exists()
    assert not any(name.endswith("attempt1") for name in rank_records(out))


# ----------------------------------------------------------------------------------------------
# d. Context and data loading on placement-group workers.


def context_loop(config):
    from torch.utils.data import DataLoader, DistributedSampler, TensorDataset
    from tessera.train.torch import prepare_data_loader, prepare_model

    context = train.get_context()
    data = TensorDataset(torch.arange(20))
    shuffled = prepare_data_loader(DataLoader(data, batch_size=3, shuffle=True))
    ordered = prepare_data_loader(DataLoader(data, batch_size=3))
    model = prepare_model(torch.nn.Linear(2, 1))
    record = {
        "rank": context.get_world_rank(), "world": context.get_world_size(),
        "local_rank": context.get_local_rank(), "local_world": context.get_local_world_size(),
        "node_rank": context.get_node_rank(), "experiment": context.get_experiment_name(),
        "samplers": [type(loader.sampler).__name__ for loader in (shuffled, ordered)],
        "distributed": [isinstance(loader.sampler, DistributedSampler)
                        for loader in (shuffled, ordered)],
        "shuffle": [loader.sampler.shuffle for loader in (shuffled, ordered)],
        "replicas": [loader.sampler.num_replicas for loader in (shuffled, ordered)],
        "batch_size": ordered.batch_size,
        "ordered": [int(i) for (batch,) in ordered for i in batch],
        "model": type(model).__name__, "device_ids": model.device_ids,
        "checkpoint": train.get_checkpoint() is not None,
        "node_id": tessera.get_runtime_context().get_node_id(),
    }
    Path(config["out"], f"rank{record['rank']}.json").write_text(json.dumps(record))
    train.report({"rank": record["rank"]})


def test_context_and_prepared_data_loaders_on_two_workers(slice_cluster, tmp_path):
    result = TorchTrainer(
        context_loop, train_loop_config={"out": str(tmp_path)},
        # The label selector keeps the two ranks off the slice: on the CPU node.
        scaling_config=train.ScalingConfig(
            num_workers=2, label_selector={"tessera.io/accelerator-type": "!TPU-V6E"}),
        run_config=train.RunConfig(name="context", storage_path=str(tmp_path / "runs"))).fit()
    records = [json.loads((tmp_path / f"rank{r}.json").read_text()) for r in range(2)]
    for r, record in enumerate(records):
        assert (record["rank"], record["world"]) == (r, 2)
        # Both on the one CPU node: local ranks 0 and 1 of 2, node rank 0.
        assert record["node_id"] == "cpu-0"
        assert (record["local_rank"], record["local_world"], record["node_rank"]) == (r, 2, 0)
        assert record["experiment"] == "context"
        assert record["distributed"] == [True, True], record["samplers"]
        assert record["shuffle"] == [True, False]
        assert record["replicas"] == [2, 2]
        assert record["batch_size"] == 3
        assert record["model"] == "DistributedDataParallel" and record["device_ids"] is None
        assert record["checkpoint"] is False
    # The two ranks' sequential shards are disjoint and cover the data set.
    assert sorted(records[0]["ordered"] + records[1]["ordered"]) == list(range(20))
    assert result.metrics == {"rank": 0}
    assert result.checkpoint is None


# ----------------------------------------------------------------------------------------------
# Errors before anything runs.


@pytest.mark.parametrize("kwargs, message", [
    (dict(use_gpu=True, use_tpu=True), "Cannot specify both `use_gpu=True` and `use_tpu=True`"),
    (dict(use_tpu=True, num_workers=4, accelerator_type="TPU-V6E"), "`topology` must be"),
    (dict(use_tpu=True, num_workers=4, topology="4x4"), "`accelerator_type` must be"),
    (dict(use_tpu=True, topology="4x4", accelerator_type="TPU-V6E",
          label_selector={"a": "b"}), "Cannot set `label_selector`"),
    (dict(topology="4x4"), "only valid with `use_tpu=True`"),
    (dict(resources_per_worker={"GPU": 1}), "`use_gpu` is False but `GPU` was found"),
    (dict(num_workers=0), "positive integer"),
    (dict(placement_strategy="ANYWHERE"), "placement_strategy"),
])
def test_bad_scaling_configs_are_value_errors(kwargs, message):
    with pytest.raises(ValueError, match=message):
        train.ScalingConfig(**kwargs)


def test_bad_trainer_arguments_are_errors():
    with pytest.raises(ValueError, match="should take in 0 or 1 arguments"):
        TorchTrainer(lambda a, b: None)
    with pytest.raises(ValueError, match="num_to_keep"):
        train.CheckpointConfig(num_to_keep=0)
    with pytest.raises(ValueError, match="max_failures"):
        train.FailureConfig(max_failures=-2)
    with pytest.raises(DeprecationWarning):
        TorchTrainer(lambda: None, resume_from_checkpoint=train.Checkpoint("/tmp"))
    with pytest.raises(RuntimeError, match="inside the training function"):
        train.report({"loss": 1.0})
    with pytest.raises(RuntimeError, match="inside the training function"):
        train.get_context()


def test_run_actor_gang_rejects_bad_options_in_one_line():
    with pytest.raises(ValueError, match="unknown gang option 'bogus'"):
        _core.run_actor_gang({"bogus": 1}, lambda options: None)
    with pytest.raises(TypeError, match="label_selectors must be a list of dicts"):
        _core.run_actor_gang({"workers": 1, "label_selectors": {"a": "b"}}, lambda o: None)
    # Ray's values, each read once into its type: amounts (not "CPU=1" text), Ray's strategy word.
    with pytest.raises(TypeError, match="resources_per_worker must be a dict of str to numbers"):
        _core.run_actor_gang({"workers": 1, "resources_per_worker": "CPU=1"}, lambda o: None)
    with pytest.raises(ValueError, match="resources_per_worker: resource \"CPU\": quantity -1"):
        _core.run_actor_gang({"workers": 1, "resources_per_worker": {"CPU": -1}}, lambda o: None)
    with pytest.raises(ValueError, match="strategy: unknown placement strategy \"DIAGONAL\""):
        _core.run_actor_gang({"workers": 1, "strategy": "DIAGONAL"}, lambda o: None)


def test_the_gang_options_of_a_scaling_config_are_ray_values():
    options = train.ScalingConfig(num_workers=2, use_gpu=True,
                                  resources_per_worker={"CPU": 0.50004, "GPU": 1, "x": 0},
                                  placement_strategy="SPREAD",
                                  label_selector={"zone": "a"}).gang_options("run", 1)
    assert options["resources_per_worker"] == {"CPU": 0.5, "GPU": 1}
    assert options["strategy"] == "SPREAD"
    assert options["label_selectors"] == [{"zone": "a"}]
    assert train.ScalingConfig().gang_options("run", 0)["resources_per_worker"] == {"CPU": 1}


def test_num_workers_not_matching_the_slice_hosts_is_a_value_error(slice_cluster, tmp_path):
    trainer = TorchTrainer(
        lambda: None, scaling_config=train.ScalingConfig(num_workers=8, **SLICE),
        run_config=train.RunConfig(name="mismatch", storage_path=str(tmp_path)))
    with pytest.raises(ValueError, match=r"num_workers=8\) does not match .* 4 hosts"):
        trainer.fit()


def test_a_start_gets_its_ranks_actor_options_as_the_core_made_them(slice_cluster):
    seen = []

    def start(options):
        seen.append((type(options), dict(options.env)))
        raise KeyError("enough")

    status = _core.run_actor_gang({"name": "typed", "workers": 1, "strategy": "STRICT_PACK",
                                   "resources_per_worker": {"CPU": 1}}, start)
    assert status["state"] == "FAILED"
    assert seen and seen[0][0] is _core.ActorOptions
    assert (seen[0][1]["RANK"], seen[0][1]["WORLD_SIZE"]) == ("0", "1")


def test_a_start_that_raises_fails_the_gang_with_the_exception_text(slice_cluster):
    def start(options):
        raise KeyError("no actor for you")

    status = _core.run_actor_gang({"name": "raising", "workers": 1}, start)
    assert status["state"] == "FAILED"
    assert "KeyError: 'no actor for you'" in status["message"], status["message"]
