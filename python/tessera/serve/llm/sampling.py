"""How the built-in engine picks each next token and decides when a request is done, with vLLM's
names and rules:

- `SamplingParams`: temperature (0 = greedy), top_p, top_k, max_tokens (None = up to the
  model's length), stop strings, stop_token_ids, ignore_eos, include_stop_str_in_output, seed
  (a per-request torch.Generator, so a seeded request samples the same tokens whatever else
  runs beside it), skip_special_tokens.
- `sample_tokens`: one token per row of logits.
- `OutputText`: a request's text as tokens arrive; a stop string ends it before the string (the
  text excludes it unless include_stop_str_in_output), and text that could be the start of a
  stop string is held back from the deltas until it is known not to be.
- `check_stop`: finish_reason "stop" (EOS: stop_reason None; a stop token: its id; a stop
  string: the string) or "length" (max_tokens, or the model's length).

Threading: the engine's thread. Cost: sampling O(vocab log vocab) per row with top_p, O(vocab)
otherwise; stop-string search O(new text + longest stop string) per token.
"""

from __future__ import annotations

import dataclasses
from typing import List, Optional, Sequence, Tuple, Union

import torch

from tessera.serve.llm.tokenizer import ByteTokenizer, IncrementalDecoder

# Below this temperature sampling is greedy (vLLM's _SAMPLING_EPS).
SAMPLING_EPS = 1e-5
# Serve LLM's cap on stop sequences per request.
MAX_STOP_SEQUENCES = 8

StopReason = Union[None, str, int]


@dataclasses.dataclass
class SamplingParams:
    temperature: float = 1.0
    top_p: float = 1.0
    top_k: int = 0
    max_tokens: Optional[int] = 16
    stop: Union[None, str, List[str]] = None
    stop_token_ids: Optional[List[int]] = None
    ignore_eos: bool = False
    include_stop_str_in_output: bool = False
    seed: Optional[int] = None
    skip_special_tokens: bool = True

    def __post_init__(self) -> None:
        if isinstance(self.stop, str):
            self.stop = [self.stop]
        self.stop = list(self.stop or [])
        self.stop_token_ids = list(self.stop_token_ids or [])
        self._check_numbers()
        if len(self.stop) > MAX_STOP_SEQUENCES:
            raise ValueError(f"stop takes at most {MAX_STOP_SEQUENCES} sequences, got "
                             f"{len(self.stop)}")
        if not all(isinstance(s, str) and s for s in self.stop):
            raise ValueError(f"stop must hold non-empty strings, got {self.stop!r}")
        if not all(_is_int(t) for t in self.stop_token_ids):
            raise ValueError(f"stop_token_ids must be ints, got {self.stop_token_ids!r}")

    def _check_numbers(self) -> None:
        if not _is_number(self.temperature) or self.temperature < 0:
            raise ValueError(f"temperature must be non-negative, got {self.temperature!r}.")
        if not _is_number(self.top_p) or not 0 < self.top_p <= 1:
            raise ValueError(f"top_p must be in (0, 1], got {self.top_p!r}.")
        if not _is_int(self.top_k) or self.top_k < -1:
            raise ValueError(f"top_k must be -1 or 0 (disable), or at least 1, got "
                             f"{self.top_k!r}.")
        if self.max_tokens is not None and (not _is_int(self.max_tokens) or self.max_tokens < 1):
            raise ValueError(f"max_tokens must be at least 1, got {self.max_tokens!r}.")
        if self.seed is not None and not _is_int(self.seed):
            raise ValueError(f"seed must be an int, got {self.seed!r}.")

    @property
    def greedy(self) -> bool:
        return self.temperature < SAMPLING_EPS

    def make_generator(self) -> Optional[torch.Generator]:
        """The request's own generator when it has a seed (None: the engine's shared one)."""
        return None if self.seed is None else torch.Generator().manual_seed(self.seed)


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def sample_tokens(logits: torch.Tensor, params: Sequence[SamplingParams],
                  generators: Sequence[torch.Generator]) -> List[int]:
    """One token id per row of `logits` [rows, vocab]: the argmax when greedy, else drawn from
    the row's softmax at its temperature, cut to its top_k and top_p, with its generator."""
    tokens = []
    for row, p, generator in zip(logits, params, generators):
        if p.greedy:
            tokens.append(int(torch.argmax(row)))
            continue
        probs = torch.softmax(row.to(torch.float64) / p.temperature, dim=-1)
        probs = _top_k_top_p(probs, p.top_k, p.top_p)
        tokens.append(int(torch.multinomial(probs, 1, generator=generator)))
    return tokens


def _top_k_top_p(probs: torch.Tensor, top_k: int, top_p: float) -> torch.Tensor:
    """`probs` with all but the k likeliest and the smallest set reaching top_p zeroed (the
    likeliest token always stays)."""
    if top_k <= 0 and top_p >= 1.0:
        return probs
    sorted_probs, order = torch.sort(probs, descending=True)
    keep = torch.ones_like(sorted_probs, dtype=torch.bool)
    if top_k > 0:
        keep[top_k:] = False
    if top_p < 1.0:
        before = torch.cumsum(sorted_probs, dim=-1) - sorted_probs   # mass of likelier tokens
        keep &= before < top_p
    keep[0] = True
    filtered = torch.zeros_like(probs)
    filtered[order[keep]] = sorted_probs[keep]
    return filtered / filtered.sum()


class OutputText:
    """One request's output text: what has been decoded, cut at a stop string, and how much of
    it has been handed out."""

    def __init__(self, tokenizer: ByteTokenizer, params: SamplingParams) -> None:
        self._decoder = IncrementalDecoder(tokenizer, params.skip_special_tokens)
        self._stops: List[str] = list(params.stop or [])
        self._include_stop = params.include_stop_str_in_output
        self._longest_stop = max((len(s) for s in self._stops), default=0)
        self.text = ""
        self._emitted = 0

    def add(self, token_id: int) -> Optional[str]:
        """Appends the text of `token_id`; the stop string it completes (the text then ends
        before it, or after it with include_stop_str_in_output), else None."""
        before = len(self.text)
        self.text += self._decoder.feed(token_id)
        if not self._stops or len(self.text) == before:
            return None
        found = self._find_stop(max(0, before - self._longest_stop + 1))
        if found is None:
            return None
        index, stop = found
        self.text = self.text[:index + (len(stop) if self._include_stop else 0)]
        return stop

    def finish(self, stopped_by_string: bool) -> None:
        """The end of the request: a character left incomplete becomes U+FFFD (unless the text
        was already cut at a stop string)."""
        tail = self._decoder.flush()
        if not stopped_by_string:
            self.text += tail

    def take_delta(self, finished: bool) -> str:
        """The text not handed out yet, less (until `finished`) a tail that may still turn out
        to begin a stop string."""
        limit = len(self.text) if finished else len(self.text) - self._held_back()
        if limit <= self._emitted:
            return ""
        delta = self.text[self._emitted:limit]
        self._emitted = limit
        return delta

    @property
    def emitted_text(self) -> str:
        return self.text[:self._emitted]

    def _find_stop(self, start: int) -> Optional[Tuple[int, str]]:
        best: Optional[Tuple[int, str]] = None
        for stop in self._stops:
            index = self.text.find(stop, start)
            if index >= 0 and (best is None or index < best[0]):
                best = (index, stop)
        return best

    def _held_back(self) -> int:
        """Length of the longest tail of the unsent text that is a proper prefix of a stop
        string (0 when the stop string would be sent anyway)."""
        if not self._stops or self._include_stop:
            return 0
        unsent = self.text[self._emitted:]
        for length in range(min(len(unsent), self._longest_stop - 1), 0, -1):
            tail = unsent[-length:]
            if any(stop.startswith(tail) for stop in self._stops):
                return length
        return 0


def check_stop(token_id: int, params: SamplingParams, eos_token_id: int, text: OutputText,
               num_output_tokens: int, num_tokens: int, max_model_len: int
               ) -> Tuple[Optional[str], StopReason]:
    """(finish_reason, stop_reason) after `token_id` was appended to a request's output
    (finish_reason None: not finished). Feeds the token's text to `text` unless it is the
    EOS or a stop token, which never show in the text."""
    if token_id == eos_token_id and not params.ignore_eos:
        return "stop", None
    if token_id in params.stop_token_ids:
        return "stop", token_id
    stop = text.add(token_id)
    if stop is not None:
        return "stop", stop
    if params.max_tokens is not None and num_output_tokens >= params.max_tokens:
        return "length", None
    if num_tokens >= max_model_len:
        return "length", None
    return None, None
