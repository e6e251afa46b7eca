"""Trains the built-in engine's demo model and writes its directory:

    python3 -m tessera.serve.llm.make_demo_model OUT_DIR [--steps N] [--corpus FILE]

The corpus is the GNU GPL version 3 text that Debian's base-files package installs on every
machine (/usr/share/common-licenses/GPL-3), cut into paragraphs, each between <|bos|> and
<|eos|>, so the model learns to end a paragraph (greedy decoding then stops with
finish_reason "stop"). Training is deterministic: fixed seeds, two threads, the same batches
in the same order. It writes model.pt, config.json (the model's fields, the steps, the last
loss and the corpus's SHA-256) and tokenizer.json (tiny_model.save_model).

Cost: about a minute on two CPU cores at the default step count; `--steps` makes it shorter.
Threading: run as a program, or call `make_demo_model` from one thread.
"""

from __future__ import annotations

import argparse
import hashlib
import math
import re
import sys
import time
from typing import Any, Dict, List, Optional, Sequence

import torch

from tessera.serve.llm.tiny_model import (TinyConfig, TinyTransformer, is_model_dir,
                                          num_parameters, save_model)
from tessera.serve.llm.tokenizer import ByteTokenizer

DEFAULT_CORPUS = "/usr/share/common-licenses/GPL-3"
DEFAULT_STEPS = 1500
# Small batches: at this size the loss falls fastest per second of CPU. Text past the window
# (rotary positions further apart than it) comes out less word-like.
SEQ_LEN = 128
BATCH_SIZE = 4
LEARNING_RATE = 6e-3
WARMUP_STEPS = 50
SEED = 0
THREADS = 2


def demo_config(tokenizer: ByteTokenizer) -> TinyConfig:
    """The demo model's shape: about 0.36 M parameters, 256 positions."""
    return TinyConfig(vocab_size=tokenizer.vocab_size, d_model=96, n_layers=3, n_heads=4,
                      d_ff=384, max_position=256)


def corpus_tokens(text: str, tokenizer: ByteTokenizer) -> torch.Tensor:
    """The training stream: every paragraph (blank-line separated, its lines kept) as
    <|bos|> bytes <|eos|>."""
    ids: List[int] = []
    for paragraph in re.split(r"\n\s*\n", text):
        paragraph = paragraph.strip("\n")
        if paragraph.strip():
            ids.extend(tokenizer.encode(paragraph, add_bos=True))
            ids.append(tokenizer.eos_token_id)
    return torch.tensor(ids, dtype=torch.long)


def learning_rate(step: int, steps: int) -> float:
    """Linear warm-up, then cosine decay to a tenth."""
    if step < WARMUP_STEPS:
        return LEARNING_RATE * (step + 1) / WARMUP_STEPS
    progress = (step - WARMUP_STEPS) / max(1, steps - WARMUP_STEPS)
    return LEARNING_RATE * (0.1 + 0.9 * 0.5 * (1.0 + math.cos(math.pi * progress)))


def train(stream: torch.Tensor, config: TinyConfig, steps: int,
          log: Optional[Any] = None) -> Dict[str, Any]:
    """Trains a fresh model on random windows of `stream`; returns {"model", "loss"}."""
    torch.manual_seed(SEED)
    model = TinyTransformer(config)
    optimizer = torch.optim.AdamW(model.parameters(), lr=LEARNING_RATE, weight_decay=0.01,
                                  betas=(0.9, 0.98))
    batches = torch.Generator().manual_seed(SEED)
    model.train()
    loss_value = float("nan")
    for step in range(steps):
        starts = torch.randint(0, len(stream) - SEQ_LEN - 1, (BATCH_SIZE,), generator=batches)
        window = torch.stack([stream[s:s + SEQ_LEN + 1] for s in starts.tolist()])
        logits = model(window[:, :-1])
        loss = torch.nn.functional.cross_entropy(logits.reshape(-1, config.vocab_size),
                                                 window[:, 1:].reshape(-1))
        for group in optimizer.param_groups:
            group["lr"] = learning_rate(step, steps)
        optimizer.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        loss_value = float(loss)
        if log is not None and (step % 20 == 0 or step == steps - 1):
            print(f"step {step + 1}/{steps} loss {loss_value:.3f}", file=log, flush=True)
    return {"model": model.eval(), "loss": loss_value}


def make_demo_model(out_dir: str, steps: int = DEFAULT_STEPS, corpus: str = DEFAULT_CORPUS,
                    log: Optional[Any] = None) -> Dict[str, Any]:
    """Trains the demo model and writes it to `out_dir`; returns what went into config.json
    besides the model's fields."""
    if not isinstance(steps, int) or steps < 1:
        raise ValueError(f"steps must be a positive int, got {steps!r}")
    try:
        with open(corpus, "rb") as f:
            raw = f.read()
    except OSError as e:
        raise FileNotFoundError(f"cannot read the training corpus {corpus} ({e.strerror}); "
                                "Debian's base-files package installs it") from None
    torch.set_num_threads(THREADS)
    tokenizer = ByteTokenizer()
    config = demo_config(tokenizer)
    stream = corpus_tokens(raw.decode("utf-8", errors="replace"), tokenizer)
    if len(stream) <= SEQ_LEN + 1:
        raise ValueError(f"the corpus {corpus} is too short to train on ({len(stream)} tokens)")
    started = time.monotonic()
    result = train(stream, config, steps, log)
    extra = {"trained_steps": steps, "final_loss": round(result["loss"], 4),
             "corpus": corpus, "corpus_sha256": hashlib.sha256(raw).hexdigest(),
             "parameters": num_parameters(result["model"])}
    save_model(out_dir, result["model"], tokenizer, extra)
    if log is not None:
        print(f"wrote {out_dir}: {extra['parameters']} parameters, {steps} steps in "
              f"{time.monotonic() - started:.1f} s, loss {extra['final_loss']}", file=log)
    return extra


def ensure_demo_model(out_dir: str, steps: int = DEFAULT_STEPS) -> str:
    """`out_dir` after making the demo model there unless it already holds one."""
    if not is_model_dir(out_dir):
        make_demo_model(out_dir, steps=steps)
    return out_dir


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python3 -m tessera.serve.llm.make_demo_model",
        description="Trains the built-in LLM engine's demo model and writes it to OUT_DIR.")
    parser.add_argument("out_dir", metavar="OUT_DIR")
    parser.add_argument("--steps", type=int, default=DEFAULT_STEPS,
                        help=f"training steps (default {DEFAULT_STEPS})")
    parser.add_argument("--corpus", default=DEFAULT_CORPUS,
                        help=f"training text (default {DEFAULT_CORPUS})")
    args = parser.parse_args(argv)
    try:
        make_demo_model(args.out_dir, steps=args.steps, corpus=args.corpus, log=sys.stdout)
    except (OSError, ValueError) as e:
        print(f"make_demo_model: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
