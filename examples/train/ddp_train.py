#!/usr/bin/env python3
"""Train a small MLP with PyTorch DistributedDataParallel on CPU: an ordinary torchrun script.

Nothing here knows about Tessera. The script reads the environment torchrun sets (RANK,
WORLD_SIZE, MASTER_ADDR, MASTER_PORT, TORCHELASTIC_RESTART_COUNT, ...) through
`init_process_group("gloo")` with the default `env://` method, so it runs unchanged under

    torchrun --standalone --nproc-per-node 4 examples/train/ddp_train.py --steps 40
    tessera train --accelerator TPU-V6E --topology 4x4 -- python3 examples/train/ddp_train.py --steps 40

(torch 1.x spells the flag --nproc_per_node; Debian 12's torch 1.13 under Python 3.11 also needs
`--redirects 9:0 --tee 9:0`, as it cannot parse its own default for them.)

What it does:

- Synthetic regression data generated from `--seed` (the same on every rank); rank R of W takes
  rows R*B .. R*B+B-1 of step s's global batch of W*B rows, so each step's data depends only on
  the step, never on how the run got there.
- A 3-layer MLP, SGD with momentum, `--steps` steps. Rank 0 prints one progress line per step;
  every rank prints its TORCHELASTIC_RESTART_COUNT at start.
- With `--checkpoint-dir`, rank 0 saves {step, model, optimizer} every `--checkpoint-every` steps
  (temp file + os.replace, so a killed writer never leaves a torn file), and every rank resumes
  from that checkpoint at start when one exists: a restarted gang continues, it does not start over.
- At the end rank 0 writes the final state_dict to `--output` (torch.save), and every rank prints
  `rank R params-sha256 <hex>` so all ranks can be checked to end identical.

Deterministic: the same --seed and world size give bit-identical final parameters, whichever
launcher sets the environment and however many times the gang was restarted from a checkpoint.
"""
import argparse
import datetime
import hashlib
import os
import socket
import sys
import time

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP

CHECKPOINT_NAME = "checkpoint.pt"


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    p.add_argument("--steps", type=int, default=40, help="training steps (default 40)")
    p.add_argument("--batch-size", type=int, default=32, help="rows per rank per step")
    p.add_argument("--seed", type=int, default=1234, help="seeds the data and the model")
    p.add_argument("--lr", type=float, default=0.05)
    p.add_argument("--momentum", type=float, default=0.9)
    p.add_argument("--hidden", type=int, default=64, help="width of the hidden layers")
    p.add_argument("--features", type=int, default=16, help="input features")
    p.add_argument("--samples", type=int, default=4096, help="size of the synthetic data set")
    p.add_argument("--checkpoint-dir", default="", help="save and resume here ('' never)")
    p.add_argument("--checkpoint-every", type=int, default=5, help="steps between checkpoints")
    p.add_argument("--step-delay", type=float, default=0.0, metavar="SECONDS",
                   help="sleep this long every step (to give tests time to kill a rank)")
    p.add_argument("--output", default="", help="rank 0 saves the final state_dict here")
    p.add_argument("--threads", type=int, default=1,
                   help="torch intra-op threads (1: the same arithmetic under every launcher)")
    p.add_argument("--pg-timeout", type=float, default=300.0, metavar="SECONDS",
                   help="process-group timeout: a rank waiting on a dead peer gives up after it")
    return p.parse_args(argv)


def log(*parts):
    print(*parts, flush=True)


def make_data(args):
    """The whole synthetic data set: x ~ N(0, 1), y = a fixed random 'teacher' MLP of x + noise."""
    g = torch.Generator().manual_seed(args.seed)
    x = torch.randn(args.samples, args.features, generator=g)
    w1 = torch.randn(args.features, 32, generator=g) / args.features ** 0.5
    w2 = torch.randn(32, 1, generator=g) / 32 ** 0.5
    y = torch.tanh(x @ w1) @ w2 + 0.01 * torch.randn(args.samples, 1, generator=g)
    return x, y


def batch_for(x, y, step, rank, world_size, batch_size):
    """Rank `rank`'s rows of step `step`'s global batch (wrapping around the data set)."""
    start = (step * world_size + rank) * batch_size
    idx = (torch.arange(batch_size) + start) % x.shape[0]
    return x[idx], y[idx]


def make_model(args):
    torch.manual_seed(args.seed)
    return nn.Sequential(
        nn.Linear(args.features, args.hidden), nn.ReLU(),
        nn.Linear(args.hidden, args.hidden), nn.ReLU(),
        nn.Linear(args.hidden, 1),
    )


def params_sha256(model):
    """sha256 over every state_dict entry's name, shape and bytes, in state_dict order."""
    h = hashlib.sha256()
    for name, t in model.state_dict().items():
        t = t.detach().cpu().contiguous()
        h.update(name.encode())
        h.update(repr(tuple(t.shape)).encode())
        h.update(t.numpy().tobytes())
    return h.hexdigest()


def save_atomically(obj, path):
    """torch.save to a temp file beside `path`, fsync, then rename over it."""
    tmp = f"{path}.tmp.{os.getpid()}"
    with open(tmp, "wb") as f:
        torch.save(obj, f)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def load_checkpoint(directory):
    path = os.path.join(directory, CHECKPOINT_NAME)
    if not directory or not os.path.exists(path):
        return None
    return torch.load(path, map_location="cpu")


def main(argv=None):
    args = parse_args(argv)
    torch.set_num_threads(args.threads)

    env = os.environ
    log(f"rank {env.get('RANK', '?')}/{env.get('WORLD_SIZE', '?')} "
        f"local_rank {env.get('LOCAL_RANK', '?')} "
        f"TORCHELASTIC_RESTART_COUNT={env.get('TORCHELASTIC_RESTART_COUNT', 'unset')} "
        f"pid {os.getpid()} host {socket.gethostname()} "
        f"master {env.get('MASTER_ADDR', '?')}:{env.get('MASTER_PORT', '?')}")
    # env:// reads RANK, WORLD_SIZE, MASTER_ADDR and MASTER_PORT, as torchrun sets them.
    dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=args.pg_timeout))
    rank, world_size = dist.get_rank(), dist.get_world_size()

    x, y = make_data(args)
    model = make_model(args)
    optimizer = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=args.momentum)

    start_step = 0
    checkpoint = load_checkpoint(args.checkpoint_dir)
    if checkpoint is not None:
        model.load_state_dict(checkpoint["model"])
        optimizer.load_state_dict(checkpoint["optimizer"])
        start_step = checkpoint["step"]
        if checkpoint.get("world_size") != world_size:
            log(f"rank {rank} warning: checkpoint was written by a world of "
                f"{checkpoint.get('world_size')}, this one has {world_size}")
        log(f"rank {rank} resumed from checkpoint at step {start_step}")
    else:
        log(f"rank {rank} starting at step 0 (no checkpoint)")
    if args.checkpoint_dir and rank == 0:
        os.makedirs(args.checkpoint_dir, exist_ok=True)

    ddp = DDP(model)  # broadcasts rank 0's parameters; they are equal on every rank anyway
    loss_fn = nn.MSELoss()

    # DDP packs gradients into all-reduce buckets in parameter order for its first backward pass,
    # then re-packs them in the order backward produced them. The packing decides the order of the
    # floating-point sums (without this pass a run resumed at step 15 ends a few bits off an
    # uninterrupted one), so one throwaway pass, with no optimizer step, makes every real step of
    # a fresh or a resumed run use the same packing: bit-identical results.
    wx, _ = batch_for(x, y, 0, rank, world_size, args.batch_size)
    ddp(wx).sum().backward()
    optimizer.zero_grad(set_to_none=True)

    for step in range(start_step, args.steps):
        bx, by = batch_for(x, y, step, rank, world_size, args.batch_size)
        optimizer.zero_grad(set_to_none=True)
        loss = loss_fn(ddp(bx), by)
        loss.backward()  # DDP averages the gradients over all ranks here
        optimizer.step()
        done = step + 1
        if rank == 0:
            log(f"step {done}/{args.steps} loss {loss.item():.6f}")
            if args.checkpoint_dir and args.checkpoint_every > 0 and done % args.checkpoint_every == 0:
                save_atomically({"step": done, "model": model.state_dict(),
                                 "optimizer": optimizer.state_dict(),
                                 "world_size": world_size, "seed": args.seed},
                                os.path.join(args.checkpoint_dir, CHECKPOINT_NAME))
                log(f"checkpoint step {done}")
        if args.step_delay > 0:
            time.sleep(args.step_delay)

    if rank == 0 and args.output:
        out_dir = os.path.dirname(os.path.abspath(args.output))
        os.makedirs(out_dir, exist_ok=True)
        save_atomically(model.state_dict(), args.output)
        log(f"rank 0 wrote final parameters to {args.output}")
    log(f"rank {rank} params-sha256 {params_sha256(model)}")
    dist.barrier()  # nobody tears the group down while rank 0 is still writing
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
