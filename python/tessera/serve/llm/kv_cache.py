"""The built-in engine's paged KV cache (PagedAttention's layout): one preallocated pool of
fixed-size blocks (16 token slots each by default) per layer for keys and one for values, and
per sequence a block table mapping its logical blocks, in order, to physical ones. A sequence
holds ceil(tokens / block_size) blocks; nothing is reserved beyond that, so sequences of any
length share the pool without fragmentation.

    allocator = BlockAllocator(num_blocks=64, block_size=16)
    allocator.allocate("a", 20)                # 2 blocks
    slots = allocator.slots("a", 0, 20)        # where tokens 0..19 live in the pool
    cache = PagedKVCache(num_layers=2, num_blocks=64, block_size=16, num_heads=4, head_dim=16)
    cache.write(0, slots, k, v)
    keys, values = cache.gather(0, slots)

`BlockAllocator` is the accounting alone (what the scheduler asks: can this sequence grow by n
tokens?), kept by the engine beside its scheduler; `PagedKVCache` is the tensors the model
runner writes and gathers at the slots the allocator gives. A model split into pipeline stages
(pipeline.py) has one PagedKVCache per stage, of that stage's layers, every one with the same
blocks: the engine's one block table addresses them all.

Threading: one thread (the engine's). Cost: allocate/free O(blocks changed); slots O(tokens);
write and gather one index operation over the given slots.
"""

from __future__ import annotations

from collections import deque
from typing import Deque, Dict, Hashable, List, Tuple

import torch

DEFAULT_BLOCK_SIZE = 16


def blocks_for(num_tokens: int, block_size: int) -> int:
    """How many blocks hold `num_tokens` tokens."""
    return -(-num_tokens // block_size)


class BlockAllocator:
    """The pool's free blocks and each sequence's block table."""

    def __init__(self, num_blocks: int, block_size: int = DEFAULT_BLOCK_SIZE) -> None:
        for name, value in (("num_blocks", num_blocks), ("block_size", block_size)):
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ValueError(f"{name} must be a positive int, got {value!r}")
        self.num_blocks = num_blocks
        self.block_size = block_size
        # Lowest ids first: a fresh cache hands out blocks 0, 1, 2... (readable tests, and the
        # same layout every run).
        self._free: Deque[int] = deque(range(num_blocks))
        self._tables: Dict[Hashable, List[int]] = {}
        self._lengths: Dict[Hashable, int] = {}

    @property
    def num_free_blocks(self) -> int:
        return len(self._free)

    @property
    def num_used_blocks(self) -> int:
        return self.num_blocks - len(self._free)

    def usage(self) -> float:
        """The fraction of blocks in use, 0 to 1 (vllm:kv_cache_usage_perc)."""
        return self.num_used_blocks / self.num_blocks

    def block_table(self, seq_id: Hashable) -> List[int]:
        return list(self._tables.get(seq_id, ()))

    def num_tokens(self, seq_id: Hashable) -> int:
        """How many token slots `seq_id` has allocated (0 if it holds none)."""
        return self._lengths.get(seq_id, 0)

    def blocks_needed(self, seq_id: Hashable, num_tokens: int) -> int:
        """How many more blocks `seq_id` needs to hold `num_tokens` tokens in all."""
        held = len(self._tables.get(seq_id, ()))
        return max(0, blocks_for(num_tokens, self.block_size) - held)

    def can_allocate(self, seq_id: Hashable, num_tokens: int) -> bool:
        return self.blocks_needed(seq_id, num_tokens) <= len(self._free)

    def allocate(self, seq_id: Hashable, num_tokens: int) -> List[int]:
        """Grows `seq_id` to hold `num_tokens` tokens in all (a new sequence starts empty);
        returns the blocks added. All or nothing: MemoryError when the pool is short."""
        if num_tokens < self._lengths.get(seq_id, 0):
            raise ValueError(f"sequence {seq_id!r} holds {self._lengths[seq_id]} tokens; "
                             f"allocate({num_tokens}) would shrink it (free it instead)")
        needed = self.blocks_needed(seq_id, num_tokens)
        if needed > len(self._free):
            raise MemoryError(f"sequence {seq_id!r} needs {needed} more KV blocks, "
                              f"{len(self._free)} are free")
        added = [self._free.popleft() for _ in range(needed)]
        self._tables.setdefault(seq_id, []).extend(added)
        self._lengths[seq_id] = num_tokens
        return added

    def append(self, seq_id: Hashable, num_new_tokens: int = 1) -> List[int]:
        """Grows `seq_id` by `num_new_tokens` tokens (a block is added only when the last one
        is full); returns the blocks added."""
        return self.allocate(seq_id, self._lengths.get(seq_id, 0) + num_new_tokens)

    def free(self, seq_id: Hashable) -> int:
        """Returns every block of `seq_id` to the pool; how many (0 for an unknown id)."""
        blocks = self._tables.pop(seq_id, [])
        self._lengths.pop(seq_id, None)
        self._free.extend(blocks)
        return len(blocks)

    def slots(self, seq_id: Hashable, start: int, end: int) -> torch.Tensor:
        """The pool slots (block * block_size + offset) of tokens start..end-1 of `seq_id`."""
        if not 0 <= start <= end <= self._lengths.get(seq_id, 0):
            raise IndexError(f"tokens {start}..{end} of sequence {seq_id!r} are not allocated "
                             f"(it holds {self._lengths.get(seq_id, 0)})")
        positions = torch.arange(start, end)
        table = torch.tensor(self._tables.get(seq_id, []), dtype=torch.long)
        return table[positions // self.block_size] * self.block_size + positions % self.block_size


class PagedKVCache:
    """Keys and values of `num_layers` layers in one pool of `num_blocks` blocks; layer 0 is
    the first layer it holds."""

    def __init__(self, num_layers: int, num_blocks: int, block_size: int, num_heads: int,
                 head_dim: int, dtype: torch.dtype = torch.float32) -> None:
        shape = (num_layers, num_blocks * block_size, num_heads, head_dim)
        self.keys = torch.zeros(shape, dtype=dtype)
        self.values = torch.zeros(shape, dtype=dtype)

    def write(self, layer: int, slots: torch.Tensor, keys: torch.Tensor,
              values: torch.Tensor) -> None:
        """Stores keys and values [len(slots), heads, head_dim] at `slots` of `layer`."""
        self.keys[layer].index_copy_(0, slots, keys.to(self.keys.dtype))
        self.values[layer].index_copy_(0, slots, values.to(self.values.dtype))

    def gather(self, layer: int, slots: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor]:
        """Keys and values [len(slots), heads, head_dim] at `slots` of `layer`."""
        return self.keys[layer].index_select(0, slots), self.values[layer].index_select(0, slots)
