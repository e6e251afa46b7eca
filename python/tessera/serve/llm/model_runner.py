"""Runs one scheduled step of the built-in engine on the model: the scheduled tokens of every
request go through the model as one flat batch (prefill chunks and decodes mixed, as vLLM V1
does), and attention runs over the paged KV cache. For each sequence and layer the new keys and
values are written to its blocks' slots, then the keys and values of all its tokens so far are
gathered from its block table, so a decode step computes one token's attention against the
cache, never the whole sequence again.

A step goes in two parts, so that the model may live in other processes than the scheduler:

- `plan_step(scheduled, allocator)`: the engine's side, beside the scheduler and its block
  accounting: the step's StepBatch (token ids, positions, each request's rows and the pool slots
  of its tokens so far, the rows that sample), plain tensors and ints that pickle small.
- `StageRunner(model, layers, ...)`: the model's side: layers `layers` and the KV pool of those
  layers (the first stage also embeds the tokens, the last one computes the logits at the
  sampling rows). `run(batch, hidden)` gives the next stage's input, or the last stage's logits.

`ModelRunner` joins them for the engine: it plans a step and runs it through its stages, either
`LocalStages` (stages in this process: the single-process engine is one stage of every layer)
or pipeline.ActorStages (one engine worker per host of a TPU slice). Split or not, every stage
runs the same operations on the same numbers, so the tokens are the same.

Threading: the engine's thread (a StageRunner: its worker's). Cost per step: the model's
projections over the batch's tokens, plus, per sequence and layer, attention of its new tokens
over its cached ones (O(new x length)).
"""

from __future__ import annotations

import dataclasses
import math
from typing import List, Optional, Sequence, Tuple

import torch

from tessera.serve.llm.kv_cache import BlockAllocator, PagedKVCache
from tessera.serve.llm.request import Request
from tessera.serve.llm.tiny_model import TinyTransformer


@dataclasses.dataclass
class Chunk:
    """One request's part of the flat batch: rows offset..offset+count-1, its tokens
    start..start+count-1, and the pool slots of its tokens 0..start+count-1."""

    offset: int
    start: int
    count: int
    slots: torch.Tensor


@dataclasses.dataclass
class StepBatch:
    """What every stage needs of one step: token ids [N] and positions [N] of the flat batch,
    its chunks, and the rows whose logits the engine samples from."""

    ids: torch.Tensor
    positions: torch.Tensor
    chunks: List[Chunk]
    sample_rows: List[int]


def plan_step(scheduled: Sequence[Tuple[Request, int]], allocator: BlockAllocator
              ) -> Tuple[StepBatch, List[Request]]:
    """The batch of a step (the scheduler has allocated its blocks) and the requests whose known
    tokens are then all computed, which sample next, in the order of batch.sample_rows."""
    ids: List[int] = []
    positions: List[int] = []
    chunks: List[Chunk] = []
    for request, count in scheduled:
        start = request.num_computed_tokens
        chunks.append(Chunk(len(ids), start, count,
                            allocator.slots(request.request_id, 0, start + count)))
        ids.extend(request.token_ids(start, start + count))
        positions.extend(range(start, start + count))
    sampling: List[Request] = []
    rows: List[int] = []
    for (request, count), chunk in zip(scheduled, chunks):
        if chunk.start + count == request.num_tokens:
            sampling.append(request)
            rows.append(chunk.offset + count - 1)
    batch = StepBatch(torch.tensor(ids, dtype=torch.long),
                      torch.tensor(positions, dtype=torch.long), chunks, rows)
    return batch, sampling


def paged_attention(q: torch.Tensor, keys: torch.Tensor, values: torch.Tensor,
                    start: int) -> torch.Tensor:
    """Attention of queries q [n, heads, head_dim] at positions start..start+n-1 over keys and
    values [start+n, heads, head_dim] of positions 0..start+n-1, each query seeing its own
    position and those before it."""
    count, head_dim = q.shape[0], q.shape[2]
    scores = torch.einsum("qhd,khd->hqk", q, keys) / math.sqrt(head_dim)
    query_positions = torch.arange(start, start + count)[:, None]
    future = torch.arange(keys.shape[0])[None, :] > query_positions
    weights = scores.masked_fill(future, float("-inf")).softmax(dim=-1)
    return torch.einsum("hqk,khd->qhd", weights, values)


class StageRunner:
    """Layers `layers` of `model` over their own KV pool of `num_blocks` blocks; `first`: it
    embeds the batch's tokens, `last`: it gives the logits at the sampling rows."""

    def __init__(self, model: TinyTransformer, layers: range, num_blocks: int, block_size: int,
                 *, first: bool, last: bool) -> None:
        config = model.config
        if layers.step != 1 or not 0 <= layers.start <= layers.stop <= config.n_layers:
            raise ValueError(f"layers {layers} are not consecutive layers of the model's "
                             f"{config.n_layers}")
        self.model = model
        self.layers = layers
        self.first = first
        self.last = last
        # A middle stage with no layers holds no weights, and its pool no layers either.
        weight = next(model.parameters(), None)
        dtype = weight.dtype if weight is not None else torch.get_default_dtype()
        self.cache = PagedKVCache(len(layers), num_blocks, block_size, config.n_heads,
                                  config.head_dim, dtype)

    @torch.no_grad()
    def run(self, batch: StepBatch, hidden: Optional[torch.Tensor] = None) -> torch.Tensor:
        """The hidden states [N, d_model] after this stage's layers (`hidden`: the previous
        stage's; none for the first), or for the last stage the logits
        [len(batch.sample_rows), vocab]."""
        x = self.model.embed(batch.ids) if self.first else hidden
        if x is None:
            raise ValueError("a stage after the first needs the previous stage's hidden states")

        def attend(layer: int, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor
                   ) -> torch.Tensor:
            local = layer - self.layers.start
            out = torch.empty_like(q)
            for c in batch.chunks:
                rows = slice(c.offset, c.offset + c.count)
                self.cache.write(local, c.slots[c.start:], k[rows], v[rows])
                keys, values = self.cache.gather(local, c.slots)
                out[rows] = paged_attention(q[rows], keys, values, c.start)
            return out

        x = self.model.forward_layers(x, batch.positions, attend, self.layers)
        if not self.last:
            return x
        if not batch.sample_rows:
            return x.new_empty((0, self.model.config.vocab_size))
        return self.model.logits(x[batch.sample_rows])


class LocalStages:
    """Stages in this process, run one after another (one stage of every layer: the
    single-process engine)."""

    def __init__(self, stages: Sequence[StageRunner]) -> None:
        if not stages or not stages[0].first or not stages[-1].last:
            raise ValueError("the stages must run from the first (embedding) to the last "
                             "(logits)")
        self.stages = list(stages)

    def run(self, batch: StepBatch) -> torch.Tensor:
        hidden: Optional[torch.Tensor] = None
        for stage in self.stages:
            hidden = stage.run(batch, hidden)
        return hidden

    def check(self) -> None:
        """Nothing to check: the stages are in this process."""


class ModelRunner:
    """Plans each step over the engine's block accounting (`allocator`) and runs it through
    `stages` (LocalStages or pipeline.ActorStages: run(batch) -> logits)."""

    def __init__(self, allocator: BlockAllocator, stages: "LocalStages") -> None:
        self.allocator = allocator
        self.stages = stages

    def execute(self, scheduled: List[Tuple[Request, int]]) -> Tuple[List[Request], torch.Tensor]:
        """Computes the scheduled tokens (the scheduler has allocated their blocks); returns the
        requests whose known tokens are then all computed, which sample next, and their logits
        [len(requests), vocab] at their last token."""
        batch, sampling = plan_step(scheduled, self.allocator)
        return sampling, self.stages.run(batch)
