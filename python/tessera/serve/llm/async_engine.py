"""The asyncio front of the built-in engine: a background thread runs LLMEngine steps while any
request is unfinished, and each request gets an async iterator of its outputs.

    engine = AsyncLLMEngine(LLMEngine(model_dir, EngineConfig()))
    async for out in engine.generate("Hello", SamplingParams(max_tokens=20), "req-1"):
        print(out.new_text, end="")
    engine.shutdown()

Cancellation: a request whose iterator is abandoned is aborted (its blocks freed, no more
steps spent on it): when the consumer closes it (`aclose()`, or leaving `async for` with break
and dropping it), when the task awaiting it is cancelled, or when it is garbage-collected.

Threading: `generate`, `abort` and `shutdown` may be called from any thread and any event loop;
the engine itself is touched only by the engine thread (adds and aborts reach it through a
queue), and outputs go back to each request's loop with call_soon_threadsafe. Cost: one thread;
per output one hop to the consumer's loop.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import threading
from typing import Any, Dict, List, Optional, Tuple

from tessera.serve.llm.engine import LLMEngine, Prompt
from tessera.serve.llm.request import RequestOutput
from tessera.serve.llm.sampling import SamplingParams

logger = logging.getLogger(__name__)


class EngineDeadError(RuntimeError):
    """The engine thread failed or was shut down; no request can run."""


class _Sink:
    """Where the engine thread puts one request's outputs: its consumer's loop and queue. The
    engine holds sinks, never streams, so an abandoned stream can be collected (and abort)."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self.queue: "asyncio.Queue[Any]" = asyncio.Queue()

    def put(self, item: Any) -> bool:
        """From the engine thread: hands `item` (an output or an exception) to the consumer's
        loop; False when that loop is closed (nobody listens any more)."""
        try:
            self.loop.call_soon_threadsafe(self.queue.put_nowait, item)
        except RuntimeError:
            return False
        return True


class RequestStream:
    """The outputs of one request, as an async iterator; closing or dropping it early aborts
    the request."""

    def __init__(self, engine: "AsyncLLMEngine", request_id: str, sink: _Sink) -> None:
        self.request_id = request_id
        self._engine = engine
        self._sink = sink
        self._done = False

    def __aiter__(self) -> "RequestStream":
        return self

    async def __anext__(self) -> RequestOutput:
        if self._done:
            raise StopAsyncIteration
        try:
            item = await self._sink.queue.get()
        except BaseException:  # cancelled (or interrupted) while waiting: give the request up
            self._close()
            raise
        if isinstance(item, BaseException):
            self._done = True
            raise item
        if item.finished:
            self._done = True
        return item

    async def aclose(self) -> None:
        self._close()

    def _close(self) -> None:
        if not self._done:
            self._done = True
            self._engine.abort(self.request_id)

    def __del__(self) -> None:
        if not getattr(self, "_done", True):
            self._close()


class AsyncLLMEngine:
    def __init__(self, engine: LLMEngine, start: bool = True) -> None:
        self.engine = engine
        self._lock = threading.Lock()
        self._wake = threading.Condition(self._lock)
        self._commands: List[Tuple[str, Any]] = []      # guarded by _lock
        self._sinks: Dict[str, _Sink] = {}               # guarded by _lock
        self._dead: Optional[BaseException] = None       # guarded by _lock
        self._stopping = False                           # guarded by _lock
        self._ids = itertools.count()
        self._thread = threading.Thread(target=self._run, name="tessera-llm-engine", daemon=True)
        if start:
            self._thread.start()

    def generate(self, prompt: Prompt, sampling_params: Optional[SamplingParams] = None,
                 request_id: Optional[str] = None) -> RequestStream:
        """Queues a request and returns the async iterator of its outputs. Must be called in a
        running event loop. ValueError for a bad prompt or a request id in use, EngineDeadError
        after a failure or shutdown (nothing is queued then)."""
        loop = asyncio.get_running_loop()
        request_id = request_id if request_id is not None else f"request-{next(self._ids)}"
        # Checked here, in the caller's thread, so a bad prompt fails the call, not the stream.
        ids = self.engine.prompt_token_ids(prompt)
        params = sampling_params or SamplingParams()
        sink = _Sink(loop)
        with self._lock:
            if self._dead is not None or self._stopping:
                raise EngineDeadError(f"the engine is not running ({self._dead or 'shut down'})")
            if request_id in self._sinks:
                raise ValueError(f"request {request_id!r} is already in the engine")
            self._sinks[request_id] = sink
            self._commands.append(("add", (request_id, ids, params)))
            self._wake.notify()
        return RequestStream(self, request_id, sink)

    def abort(self, request_id: str) -> None:
        """Aborts a request (a no-op once it finished)."""
        with self._lock:
            self._sinks.pop(request_id, None)
            self._commands.append(("abort", request_id))
            self._wake.notify()

    def shutdown(self, timeout: Optional[float] = 10.0) -> None:
        """Stops the engine thread after its current step; unfinished requests' iterators
        raise EngineDeadError."""
        with self._lock:
            self._stopping = True
            self._wake.notify()
        if self._thread.is_alive() and threading.current_thread() is not self._thread:
            self._thread.join(timeout)
        self._fail_all(EngineDeadError("the engine was shut down"))

    @property
    def num_unfinished_requests(self) -> int:
        """Requests the engine holds, as of its last step (read from any thread)."""
        with self._lock:
            pending = sum(1 for kind, _ in self._commands if kind == "add")
        return self.engine.get_num_unfinished_requests() + pending

    def _run(self) -> None:
        try:
            while True:
                with self._lock:
                    while (not self._commands and not self._stopping
                           and not self.engine.has_unfinished_requests()):
                        self._wake.wait()
                    if self._stopping:
                        return
                    commands, self._commands = self._commands, []
                self._apply(commands)
                self._deliver(self.engine.step() if self.engine.has_unfinished_requests() else [])
        except BaseException as e:  # the engine cannot go on: every waiting consumer learns why
            logger.exception("the LLM engine thread failed")
            with self._lock:
                self._dead = e
            self._fail_all(EngineDeadError(f"the engine failed: {e!r}"))

    def _apply(self, commands: List[Tuple[str, Any]]) -> None:
        for kind, argument in commands:
            if kind == "add":
                request_id, ids, params = argument
                try:
                    self.engine.add_request(request_id, ids, params)
                except ValueError as e:
                    self._deliver_error(request_id, e)
            else:
                self.engine.abort_request(argument)

    def _deliver(self, outputs: List[RequestOutput]) -> None:
        for out in outputs:
            with self._lock:
                sink = self._sinks.get(out.request_id)
                if out.finished:
                    self._sinks.pop(out.request_id, None)
            if sink is not None and not sink.put(out):
                self.abort(out.request_id)

    def _deliver_error(self, request_id: str, error: BaseException) -> None:
        with self._lock:
            sink = self._sinks.pop(request_id, None)
        if sink is not None:
            sink.put(error)

    def _fail_all(self, error: BaseException) -> None:
        with self._lock:
            sinks, self._sinks = list(self._sinks.values()), {}
        for sink in sinks:
            sink.put(error)
