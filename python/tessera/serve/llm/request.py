"""One request inside the built-in engine, and the deltas the engine hands out.

A `Request` has vLLM V1's single counter of progress: `num_computed_tokens` chases
`num_tokens` (prompt + output so far). A prefill is many tokens at once, a decode one, a chunked
prefill part of the prompt; a request preempted by RECOMPUTE goes back to 0 computed tokens and
recomputes prompt and output before it samples again.

Threading: the engine's thread. Cost: O(1) per field; `token_ids(start, end)` O(end - start).
"""

from __future__ import annotations

import dataclasses
import enum
from typing import Dict, List, Optional

import torch

from tessera.serve.llm.sampling import OutputText, SamplingParams, StopReason
from tessera.serve.llm.tokenizer import ByteTokenizer


class RequestStatus(enum.Enum):
    WAITING = "waiting"
    RUNNING = "running"
    PREEMPTED = "preempted"
    FINISHED = "finished"


class Request:
    def __init__(self, request_id: str, prompt_token_ids: List[int], params: SamplingParams,
                 tokenizer: ByteTokenizer, arrival_time: float) -> None:
        self.request_id = request_id
        self.prompt_token_ids = list(prompt_token_ids)
        self.output_token_ids: List[int] = []
        self.params = params
        self.generator: Optional[torch.Generator] = params.make_generator()
        self.text = OutputText(tokenizer, params)
        self.status = RequestStatus.WAITING
        self.num_computed_tokens = 0
        self.num_preemptions = 0
        self.finish_reason: Optional[str] = None
        self.stop_reason: StopReason = None
        self.arrival_time = arrival_time
        self.first_scheduled_time: Optional[float] = None
        self.first_token_time: Optional[float] = None
        self.last_token_time: Optional[float] = None

    @property
    def num_prompt_tokens(self) -> int:
        return len(self.prompt_token_ids)

    @property
    def num_output_tokens(self) -> int:
        return len(self.output_token_ids)

    @property
    def num_tokens(self) -> int:
        return len(self.prompt_token_ids) + len(self.output_token_ids)

    @property
    def finished(self) -> bool:
        return self.status is RequestStatus.FINISHED

    def token_ids(self, start: int, end: int) -> List[int]:
        """Tokens start..end-1 of prompt + output."""
        prompt = len(self.prompt_token_ids)
        head = self.prompt_token_ids[start:min(end, prompt)]
        return head + self.output_token_ids[max(0, start - prompt):max(0, end - prompt)]


@dataclasses.dataclass
class RequestOutput:
    """What one step did for one request: the token it added (vLLM's DELTA output kind), the
    text that token made sendable, and, on the last one, why the request finished. Timestamps
    are the engine clock's; `text` is all the text handed out so far."""

    request_id: str
    new_token_ids: List[int]
    new_text: str
    text: str
    finished: bool
    finish_reason: Optional[str]
    stop_reason: StopReason
    num_prompt_tokens: int
    num_output_tokens: int
    arrival_time: float
    first_token_time: Optional[float]
    last_token_time: Optional[float]

    @property
    def usage(self) -> Dict[str, int]:
        """OpenAI's usage object so far."""
        return {"prompt_tokens": self.num_prompt_tokens,
                "completion_tokens": self.num_output_tokens,
                "total_tokens": self.num_prompt_tokens + self.num_output_tokens}

    @classmethod
    def of(cls, request: Request, new_token_ids: List[int]) -> "RequestOutput":
        finished = request.finished
        new_text = request.text.take_delta(finished)
        return cls(request_id=request.request_id, new_token_ids=list(new_token_ids),
                   new_text=new_text, text=request.text.emitted_text, finished=finished,
                   finish_reason=request.finish_reason, stop_reason=request.stop_reason,
                   num_prompt_tokens=request.num_prompt_tokens,
                   num_output_tokens=request.num_output_tokens,
                   arrival_time=request.arrival_time,
                   first_token_time=request.first_token_time,
                   last_token_time=request.last_token_time)
