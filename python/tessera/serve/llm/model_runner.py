"""Runs one scheduled step of the built-in engine on the model: the scheduled tokens of every
request go through the model as one flat batch (prefill chunks and decodes mixed, as vLLM V1
does), and attention runs over the paged KV cache. For each sequence and layer the new keys and
values are written to its blocks' slots, then the keys and values of all its tokens so far are
gathered from its block table, so a decode step computes one token's attention against the
cache, never the whole sequence again.

Threading: the engine's thread. Cost per step: the model's projections over the batch's tokens,
plus, per sequence and layer, attention of its new tokens over its cached ones
(O(new x length)).
"""

from __future__ import annotations

import dataclasses
import math
from typing import List, Tuple

import torch

from tessera.serve.llm.kv_cache import PagedKVCache
from tessera.serve.llm.request import Request
from tessera.serve.llm.tiny_model import TinyTransformer


@dataclasses.dataclass
class _Chunk:
    """One request's part of the flat batch: rows offset..offset+count-1, its tokens
    start..start+count-1, and the pool slots of its tokens 0..start+count-1."""

    offset: int
    start: int
    count: int
    slots: torch.Tensor


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


class ModelRunner:
    def __init__(self, model: TinyTransformer, cache: PagedKVCache) -> None:
        self.model = model
        self.cache = cache

    @torch.no_grad()
    def execute(self, scheduled: List[Tuple[Request, int]]) -> Tuple[List[Request], torch.Tensor]:
        """Computes the scheduled tokens (the scheduler has allocated their blocks); returns the
        requests whose known tokens are then all computed, which sample next, and their logits
        [len(requests), vocab] at their last token."""
        ids: List[int] = []
        positions: List[int] = []
        chunks: List[_Chunk] = []
        for request, count in scheduled:
            start = request.num_computed_tokens
            chunks.append(_Chunk(len(ids), start, count, self.cache.allocator.slots(
                request.request_id, 0, start + count)))
            ids.extend(request.token_ids(start, start + count))
            positions.extend(range(start, start + count))

        def attend(layer: int, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
            out = torch.empty_like(q)
            for c in chunks:
                rows = slice(c.offset, c.offset + c.count)
                self.cache.write(layer, c.slots[c.start:], k[rows], v[rows])
                keys, values = self.cache.gather(layer, c.slots)
                out[rows] = paged_attention(q[rows], keys, values, c.start)
            return out

        hidden = self.model.forward_tokens(torch.tensor(ids, dtype=torch.long),
                                           torch.tensor(positions, dtype=torch.long), attend)
        sampling: List[Request] = []
        rows: List[int] = []
        for (request, count), chunk in zip(scheduled, chunks):
            if chunk.start + count == request.num_tokens:
                sampling.append(request)
                rows.append(chunk.offset + count - 1)
        if not rows:
            return [], hidden.new_empty((0, self.model.config.vocab_size))
        return sampling, self.model.logits(hidden[rows])
