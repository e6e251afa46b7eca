"""A PyTorch DDP model trained with tessera.train's TorchTrainer on a whole TPU v6e 4x4 slice
(4 ranks, one per host; gloo on CPU), with a rank killed mid-training: the whole group restarts
from the latest checkpoint and ends with the same parameters as an uninterrupted run.

    scripts/run-example python train_slice      (brings up examples/clusters/demo.yaml)
"""
import os
import signal
import tempfile

import torch
from torch import nn

import tessera
from tessera import train
from tessera.train import CheckpointConfig, FailureConfig, RunConfig, ScalingConfig
from tessera.train.torch import TorchTrainer, prepare_model

STEPS = 30


def train_loop(config):
    torch.set_num_threads(1)
    context = train.get_context()
    rank, world = context.get_world_rank(), context.get_world_size()
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 32), nn.ReLU(), nn.Linear(32, 1))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
    start = 0
    checkpoint = train.get_checkpoint()
    if checkpoint is not None:                   # a restart: resume where the group left off
        with checkpoint.as_directory() as folder:
            state = torch.load(os.path.join(folder, "state.pt"))
        model.load_state_dict(state["model"])
        optimizer.load_state_dict(state["optimizer"])
        start = state["step"]
        if rank == 0:
            print(f"resumed from step {start}")
    ddp = prepare_model(model)
    g = torch.Generator().manual_seed(1)
    x = torch.randn(512, 8, generator=g)
    y = x.sum(dim=1, keepdim=True)
    # One throwaway backward pass fixes DDP's gradient bucket order, so a resumed group sums in
    # the same order as a fresh one (and ends with bit-identical parameters).
    ddp(x[:16]).sum().backward()
    optimizer.zero_grad(set_to_none=True)
    first_attempt = os.environ.get("TORCHELASTIC_RESTART_COUNT") == "0"
    for step in range(start, STEPS):
        if config["kill"] and rank == 2 and step == 12 and first_attempt:
            os.kill(os.getpid(), signal.SIGKILL)     # a rank dies mid-training
        batch = slice((step * world + rank) * 16 % 512, (step * world + rank) * 16 % 512 + 16)
        optimizer.zero_grad()
        loss = nn.functional.mse_loss(ddp(x[batch]), y[batch])
        loss.backward()
        optimizer.step()
        saved = None
        if rank == 0 and (step + 1) % 5 == 0:
            folder = tempfile.mkdtemp()
            torch.save({"step": step + 1, "model": model.state_dict(),
                        "optimizer": optimizer.state_dict()}, os.path.join(folder, "state.pt"))
            saved = train.Checkpoint.from_directory(folder)
        train.report({"step": step + 1, "loss": loss.item()}, checkpoint=saved)


def fit(name, storage, kill):
    trainer = TorchTrainer(
        train_loop, train_loop_config={"kill": kill},
        scaling_config=ScalingConfig(use_tpu=True, topology="4x4", accelerator_type="TPU-V6E"),
        run_config=RunConfig(name=name, storage_path=storage,
                             failure_config=FailureConfig(max_failures=1),
                             checkpoint_config=CheckpointConfig(num_to_keep=2)))
    result = trainer.fit()
    with result.checkpoint.as_directory() as folder:
        return result, torch.load(os.path.join(folder, "state.pt"))["model"]


def main():
    tessera.init(address="auto")
    storage = tempfile.mkdtemp(prefix="tessera-train-")
    result, killed = fit("with-a-killed-rank", storage, kill=True)
    print("final metrics:", result.metrics)
    _, clean = fit("uninterrupted", storage, kill=False)
    same = all(torch.equal(killed[k], clean[k]) for k in clean)
    print("same parameters as an uninterrupted run:", same)
    tessera.shutdown()
    if not same:
        raise SystemExit(1)


if __name__ == "__main__":
    main()
