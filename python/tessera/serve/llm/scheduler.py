"""The built-in engine's scheduler, as vLLM V1's: a `waiting` queue and a `running` list, and no
prefill or decode mode. Each step it

1. gives tokens to running requests first, in order: each gets what it has left to compute
   (one token for a decode, the rest of a prompt for a chunked prefill) within the step's token
   budget (`max_num_batched_tokens`), with KV blocks for them; when the pool is short it
   preempts the last running request (RECOMPUTE: its blocks are freed, it goes back to the front
   of `waiting` with nothing computed), until the request fits or was itself preempted;
2. then, if nothing was preempted this step, admits waiting requests in order while the budget,
   `max_num_seqs` running requests and the free blocks allow, each with as much of its prompt as
   the budget holds (chunked prefill).

Threading: the engine's thread. Cost: O(running + admitted) per step, plus the block
allocator's.
"""

from __future__ import annotations

import dataclasses
from collections import deque
from typing import Deque, Dict, List, Optional, Tuple

from tessera.serve.llm.kv_cache import BlockAllocator
from tessera.serve.llm.request import Request, RequestStatus


@dataclasses.dataclass
class SchedulerOutput:
    """One step's plan: (request, tokens to compute) in batch order, running ones first, and
    the requests preempted to make room."""

    scheduled: List[Tuple[Request, int]]
    preempted: List[Request]

    @property
    def num_batched_tokens(self) -> int:
        return sum(n for _, n in self.scheduled)


class Scheduler:
    def __init__(self, allocator: BlockAllocator, max_num_seqs: int,
                 max_num_batched_tokens: int) -> None:
        self.allocator = allocator
        self.max_num_seqs = max_num_seqs
        self.max_num_batched_tokens = max_num_batched_tokens
        self.waiting: Deque[Request] = deque()
        self.running: List[Request] = []
        self.num_preemptions = 0

    def add(self, request: Request) -> None:
        request.status = RequestStatus.WAITING
        self.waiting.append(request)

    def schedule(self) -> SchedulerOutput:
        budget = self.max_num_batched_tokens
        scheduled: List[Tuple[Request, int]] = []
        preempted: List[Request] = []
        index = 0
        while index < len(self.running) and budget > 0:
            request = self.running[index]
            num_new = min(request.num_tokens - request.num_computed_tokens, budget)
            if not self._make_room(request, request.num_computed_tokens + num_new, preempted):
                break  # it preempted itself, the last running request
            scheduled.append((request, num_new))
            budget -= num_new
            index += 1
        if not preempted:
            budget = self._admit(budget, scheduled)
        return SchedulerOutput(scheduled, preempted)

    def _make_room(self, request: Request, num_tokens: int, preempted: List[Request]) -> bool:
        """Allocates `request` blocks for `num_tokens` tokens, preempting running requests from
        the back until it fits; False when `request` itself had to go."""
        while not self.allocator.can_allocate(request.request_id, num_tokens):
            victim = self.running.pop()
            self._preempt(victim)
            preempted.append(victim)
            if victim is request:
                return False
        self.allocator.allocate(request.request_id, num_tokens)
        return True

    def _preempt(self, request: Request) -> None:
        self.allocator.free(request.request_id)
        request.num_computed_tokens = 0
        request.num_preemptions += 1
        request.status = RequestStatus.PREEMPTED
        self.waiting.appendleft(request)
        self.num_preemptions += 1

    def _admit(self, budget: int, scheduled: List[Tuple[Request, int]]) -> int:
        """Moves waiting requests to running within the budget and the pool; the budget left."""
        while self.waiting and budget > 0 and len(self.running) < self.max_num_seqs:
            request = self.waiting[0]
            num_new = min(request.num_tokens - request.num_computed_tokens, budget)
            total = request.num_computed_tokens + num_new
            if not self.allocator.can_allocate(request.request_id, total):
                break  # first come, first served: nobody overtakes the head of the queue
            self.waiting.popleft()
            self.allocator.allocate(request.request_id, total)
            request.status = RequestStatus.RUNNING
            self.running.append(request)
            scheduled.append((request, num_new))
            budget -= num_new
        return budget

    def update(self, scheduled: List[Tuple[Request, int]]) -> None:
        """Counts the tokens a step computed."""
        for request, num_new in scheduled:
            request.num_computed_tokens += num_new

    def finish(self, request: Request) -> None:
        """Takes a finished request out and frees its blocks."""
        request.status = RequestStatus.FINISHED
        if request in self.running:
            self.running.remove(request)
        else:
            try:
                self.waiting.remove(request)
            except ValueError:
                pass
        self.allocator.free(request.request_id)

    def find(self, request_id: str) -> Optional[Request]:
        for request in list(self.running) + list(self.waiting):
            if request.request_id == request_id:
                return request
        return None

    def counts(self) -> Dict[str, int]:
        return {"running": len(self.running), "waiting": len(self.waiting)}
