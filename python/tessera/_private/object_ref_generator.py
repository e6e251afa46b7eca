"""`tessera.ObjectRefGenerator` (Ray's name): what `.remote()` returns for a streaming generator
task or actor method (num_returns="streaming", the default for generator functions). Iterating
it gives an ObjectRef for each value the task yields, as soon as the task has yielded it (the
task runs on meanwhile); the iteration ends when the task does. When the task fails, the ref
after its last value raises that failure at `tessera.get`, and the iteration then ends.

    @tessera.remote
    def tokens(prompt):
        for word in prompt.split():
            yield word

    for ref in tokens.remote("one two three"):
        print(tessera.get(ref))

`async for` works too (in an event loop), and `tessera.cancel(generator)` cancels the task.
"""

from __future__ import annotations

import asyncio
from typing import Optional

from tessera import _core
from tessera._private import worker


class ObjectRefGenerator:
    """The values of a streaming generator task, each an ObjectRef, in the order yielded."""

    def __init__(self, generator_ref: "_core.ObjectRef") -> None:
        self._generator_ref = generator_ref
        self._next_index = 0
        self._finished = False
        # The next value's ref, taken by next_ready before next asked for it: each value's ref
        # is made once (the object lives as long as that ref).
        self._peeked: Optional["_core.ObjectRef"] = None

    def __iter__(self) -> "ObjectRefGenerator":
        return self

    def __next__(self) -> "_core.ObjectRef":
        ref = self._next(timeout_s=None)
        if ref is None:
            raise StopIteration
        return ref

    def __aiter__(self) -> "ObjectRefGenerator":
        return self

    async def __anext__(self) -> "_core.ObjectRef":
        ref = await asyncio.get_running_loop().run_in_executor(None, self._next, None)
        if ref is None:
            raise StopAsyncIteration
        return ref

    def _next(self, timeout_s: Optional[float]) -> Optional["_core.ObjectRef"]:
        if self._peeked is not None:
            ref, self._peeked = self._peeked, None
            self._next_index += 1
            return ref
        if self._finished:
            return None
        try:
            ref = _core.generator_next(self._generator_ref, self._next_index, timeout_s)
        except _core.CoreError as e:
            worker.raise_core_error(e)
        if ref is None:
            self._finished = True
            return None
        self._next_index += 1
        return ref

    def next_ready(self) -> bool:
        """Whether the next value (or the end) is there, so that `next` would not wait."""
        if self._finished or self._peeked is not None:
            return True
        try:
            ref = _core.generator_next(self._generator_ref, self._next_index, 0)
        except _core.CoreError as e:
            if e.args[0] == "GET_TIMEOUT":
                return False
            worker.raise_core_error(e)
        if ref is None:
            self._finished = True
        else:
            self._peeked = ref
        return True

    def completed(self) -> "_core.ObjectRef":
        """The ref of the task's own outcome: ready once it has ended (its failure, if any)."""
        return self._generator_ref

    def is_finished(self) -> bool:
        """Whether the iteration has ended (every value taken, the task over)."""
        return self._finished

    def __del__(self) -> None:
        # The values not taken are let go (and any the task still yields).
        ref = getattr(self, "_generator_ref", None)
        if ref is not None:
            try:
                _core.generator_release(ref, self._next_index)
            except Exception:
                pass  # the runtime is shutting down

    def __reduce__(self):
        raise TypeError("An ObjectRefGenerator cannot be passed to another process: only the "
                        "caller that started the task reads its values")

    def __repr__(self) -> str:
        return f"ObjectRefGenerator({self._generator_ref.hex()}, next={self._next_index})"
