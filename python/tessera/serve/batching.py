"""`@serve.batch`: callers pass single items, the function gets them as lists.

    @serve.batch(max_batch_size=8, batch_wait_timeout_s=0.05)
    async def embed(self, texts: List[str]) -> List[List[float]]: ...

    vector = await self.embed("hello")

As Ray Serve's: the function (or method) must be `async def` and take one list, and return a list
of the same length (RayServeException otherwise), or be an async generator that yields such a
list per step (put StopIteration in a slot to end that caller's stream; each caller gets an async
generator of its own values). A queue per replica (per instance, for methods; per function
otherwise) starts a batch when its first item arrives and hands it to the function once it holds
`max_batch_size` (as `batch_size_fn(items)` measures, else the item count) or
`batch_wait_timeout_s` has passed, whichever is first; up to `max_concurrent_batches` batches run
at once. Requests of different multiplexed model ids go in separate batches. An error of the
function reaches every caller of its batch; a caller cancelled while waiting is dropped from its
batch (or its result discarded) and the others go on. `handler.set_max_batch_size(n)` and
`handler.set_batch_wait_timeout_s(t)` change the settings live (from `reconfigure`, say); a
batch already being filled keeps the settings it started with.

Threading: all on the replica's event loop (a queue belongs to the loop it was made on). Cost:
one future per call; one task per batch.
"""

from __future__ import annotations

import asyncio
import contextvars
import inspect
import logging
import weakref
from collections import deque
from dataclasses import dataclass
from functools import wraps
from typing import Any, Callable, Dict, List, Optional

from tessera.serve import context as serve_context
from tessera.serve._constants import SERVE_LOGGER_NAME
from tessera.serve.exceptions import RayServeException

logger = logging.getLogger(SERVE_LOGGER_NAME)

# What a streaming batch function puts in a caller's slot to end that caller's stream.
USER_CODE_STREAMING_SENTINELS = (StopIteration, StopAsyncIteration)


@dataclass
class _SingleRequest:
    self_arg: Any
    item: Any
    future: asyncio.Future
    request_context: serve_context.RequestContext


@dataclass
class _GeneratorResult:
    result: Any
    next_future: asyncio.Future


class _Settings:
    """A batch handler's settings, shared by its queues and changed live by its setters."""

    def __init__(self, max_batch_size: int, batch_wait_timeout_s: float,
                 max_concurrent_batches: int, batch_size_fn: Optional[Callable]) -> None:
        self.max_batch_size = max_batch_size
        self.batch_wait_timeout_s = batch_wait_timeout_s
        self.max_concurrent_batches = max_concurrent_batches
        self.batch_size_fn = batch_size_fn


def _set_result(future: asyncio.Future, result: Any) -> None:
    if not future.done():
        future.set_result(result)


def _set_exception(future: asyncio.Future, exception: BaseException) -> None:
    if not future.done():
        future.set_exception(exception)


class _BatchQueue:
    """The queue of one batch handler on one instance (or function), on one event loop."""

    def __init__(self, func: Callable, settings: _Settings) -> None:
        self._func = func
        self._settings = settings
        self._queue: deque = deque()
        self._arrived = asyncio.Event()
        self._semaphore = asyncio.Semaphore(settings.max_concurrent_batches)
        self._tasks: set = set()
        self.loop = asyncio.get_running_loop()
        # The loop task must not carry the request context of the call that started it.
        self._loop_task = self.loop.create_task(self._process_batches(),
                                                context=_empty_request_context())

    def put(self, request: _SingleRequest) -> None:
        self._queue.append(request)
        self._arrived.set()

    def _size(self, batch: List[_SingleRequest]) -> int:
        size_fn = self._settings.batch_size_fn
        return len(batch) if size_fn is None else size_fn([r.item for r in batch])

    async def _next_batch(self) -> List[_SingleRequest]:
        """Waits for a first item, then fills the batch until it is full or the wait is over
        (the settings of the moment the batch started)."""
        while not self._queue:
            self._arrived.clear()
            await self._arrived.wait()
        max_size = self._settings.max_batch_size
        deadline = self.loop.time() + self._settings.batch_wait_timeout_s
        batch: List[_SingleRequest] = []
        while True:
            if not self._take(batch, max_size):
                break  # full, or the next item would overflow it
            remaining = deadline - self.loop.time()
            if remaining <= 0:
                break
            self._arrived.clear()
            try:
                await asyncio.wait_for(self._arrived.wait(), remaining)
            except asyncio.TimeoutError:
                self._take(batch, max_size)
                break
        return batch

    def _take(self, batch: List[_SingleRequest], max_size: int) -> bool:
        """Moves queued requests into `batch` while they fit; False once it is full."""
        while self._queue:
            request = self._queue[0]
            if request.future.cancelled():
                self._queue.popleft()
                continue
            if self._size(batch + [request]) > max_size:
                if not batch:
                    self._queue.popleft()
                    _set_exception(request.future, RuntimeError(
                        "Size of item is greater than max_batch_size. Please increase the "
                        "max_batch_size or check the implementation of the batch_size_fn."))
                    continue
                return False
            batch.append(self._queue.popleft())
        return self._size(batch) < max_size if batch else True

    async def _process_batches(self) -> None:
        while True:
            # A batch starts forming once one may run: while the others run, items queue up,
            # so the next batch takes them all (up to its size).
            await self._semaphore.acquire()
            batch = await self._next_batch()
            if not batch:
                self._semaphore.release()
                continue
            task = self.loop.create_task(self._run_batches(batch))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    async def _run_batches(self, batch: List[_SingleRequest]) -> None:
        try:
            by_model: Dict[str, List[_SingleRequest]] = {}
            for request in batch:
                by_model.setdefault(request.request_context.multiplexed_model_id,
                                    []).append(request)
            await asyncio.gather(*(self._run_batch(part) for part in by_model.values()))
        finally:
            self._semaphore.release()

    async def _run_batch(self, batch: List[_SingleRequest]) -> None:
        batch = [request for request in batch if not request.future.cancelled()]
        if not batch:
            return
        futures = [request.future for request in batch]
        serve_context._set_request_context(batch[0].request_context)
        try:
            items = [request.item for request in batch]
            self_arg = batch[0].self_arg
            call = self._func(items) if self_arg is None else self._func(self_arg, items)
            if inspect.isasyncgen(call):
                await _consume_generator(call, futures)
            else:
                _assign_results(await call, futures)
        except Exception as e:
            for future in futures:
                _set_exception(future, e)


def _empty_request_context() -> contextvars.Context:
    context = contextvars.copy_context()
    context.run(serve_context._unset_request_context)
    return context


def _validate_results(results: Any, length: int) -> None:
    if not hasattr(results, "__len__") or len(results) != length:
        got = len(results) if hasattr(results, "__len__") else type(results).__name__
        raise RayServeException("Batched function doesn't preserve batch size. The input list "
                                f"has length {length} but the returned list has length {got}.")


def _assign_results(results: Any, futures: List[asyncio.Future]) -> None:
    _validate_results(results, len(futures))
    for result, future in zip(results, futures):
        _set_result(future, result)


async def _consume_generator(generator: Any, futures: List[asyncio.Future]) -> None:
    """Hands each step's list out, slot by slot: a caller's next value goes to the future its
    previous value came with; a sentinel ends that caller's stream."""
    loop = asyncio.get_running_loop()
    pending: List[Optional[asyncio.Future]] = list(futures)
    try:
        async for results in generator:
            _validate_results(results, len(pending))
            for index, result in enumerate(results):
                future = pending[index]
                if future is None:
                    continue  # this caller's stream has ended
                if result in USER_CODE_STREAMING_SENTINELS:
                    _set_exception(future, StopAsyncIteration())
                    pending[index] = None
                else:
                    following = loop.create_future()
                    _set_result(future, _GeneratorResult(result, following))
                    pending[index] = following
        for future in pending:
            if future is not None:
                _set_exception(future, StopAsyncIteration())
    except Exception as e:
        for future in pending:
            if future is not None:
                _set_exception(future, e)


def _self_of(args: tuple, func: Callable) -> Any:
    """The instance when the handler was called as a method (Ray's check: args[0] has an
    attribute of the function's name that wraps this function)."""
    if args:
        method = getattr(args[0], func.__name__, None)
        if method is not None and getattr(method, "__wrapped__", None) is func:
            return args[0]
    return None


def _check_settings(max_batch_size: Any, batch_wait_timeout_s: Any,
                    max_concurrent_batches: Any, batch_size_fn: Any) -> int:
    if isinstance(max_batch_size, float) and max_batch_size.is_integer():
        max_batch_size = int(max_batch_size)
    if not isinstance(max_batch_size, int) or isinstance(max_batch_size, bool):
        raise TypeError(f"max_batch_size must be integer >= 1, got {max_batch_size}")
    if max_batch_size < 1:
        raise ValueError(f"max_batch_size must be an integer >= 1, got {max_batch_size}")
    _check_timeout(batch_wait_timeout_s)
    if (not isinstance(max_concurrent_batches, int) or isinstance(max_concurrent_batches, bool)
            or max_concurrent_batches < 1):
        raise TypeError("max_concurrent_batches must be an integer >= 1, got "
                        f"{max_concurrent_batches}")
    if batch_size_fn is not None and not callable(batch_size_fn):
        raise TypeError(f"batch_size_fn must be a callable or None, got {type(batch_size_fn)}")
    return max_batch_size


def _check_timeout(batch_wait_timeout_s: Any) -> None:
    if isinstance(batch_wait_timeout_s, bool) or not isinstance(batch_wait_timeout_s,
                                                                (float, int)):
        raise TypeError(f"batch_wait_timeout_s must be a float >= 0, got {batch_wait_timeout_s}")
    if batch_wait_timeout_s < 0:
        raise ValueError(f"batch_wait_timeout_s must be a float >= 0, got {batch_wait_timeout_s}")


class _Queues:
    """A handler's queues: one per instance (methods) or one for the function, each made on
    first use on the running loop (and made again on another loop)."""

    def __init__(self, func: Callable, settings: _Settings) -> None:
        self._func = func
        self._settings = settings
        self._per_instance: "weakref.WeakKeyDictionary[Any, _BatchQueue]" = \
            weakref.WeakKeyDictionary()
        self._unhashable: Dict[int, _BatchQueue] = {}  # instances that can't be weakly keyed
        self._function_queue: Optional[_BatchQueue] = None

    def get(self, self_arg: Any) -> _BatchQueue:
        queue = self._lookup(self_arg)
        if queue is None or queue.loop is not asyncio.get_running_loop():
            queue = _BatchQueue(self._func, self._settings)
            self._store(self_arg, queue)
        return queue

    def _lookup(self, self_arg: Any) -> Optional[_BatchQueue]:
        if self_arg is None:
            return self._function_queue
        try:
            return self._per_instance.get(self_arg)
        except TypeError:
            return self._unhashable.get(id(self_arg))

    def _store(self, self_arg: Any, queue: _BatchQueue) -> None:
        if self_arg is None:
            self._function_queue = queue
            return
        try:
            self._per_instance[self_arg] = queue
        except TypeError:
            self._unhashable[id(self_arg)] = queue


def batch(_func: Optional[Callable] = None, /, max_batch_size: int = 10,
          batch_wait_timeout_s: float = 0.01, max_concurrent_batches: int = 1,
          batch_size_fn: Optional[Callable[[List], int]] = None) -> Callable:
    """Converts an `async def` function or method taking a list into one taking single items
    (see the module doc). Bare (`@serve.batch`) or with settings."""
    if _func is not None:
        if not callable(_func):
            raise TypeError("@serve.batch can only be used to decorate functions or methods.")
        if not (inspect.iscoroutinefunction(_func) or inspect.isasyncgenfunction(_func)):
            raise TypeError("Functions decorated with @serve.batch must be 'async def'")
    max_batch_size = _check_settings(max_batch_size, batch_wait_timeout_s,
                                     max_concurrent_batches, batch_size_fn)

    def decorator(func: Callable) -> Callable:
        settings = _Settings(max_batch_size, batch_wait_timeout_s, max_concurrent_batches,
                             batch_size_fn)
        queues = _Queues(func, settings)

        def enqueue(args: tuple, kwargs: dict) -> asyncio.Future:
            self_arg = _self_of(args, func)
            items = list(args[1:] if self_arg is not None else args) + list(kwargs.values())
            if len(items) != 1:
                raise TypeError(f"{func.__name__}() takes one item per call (the batch function "
                                f"gets a list of them), got {len(items)} arguments")
            future = asyncio.get_running_loop().create_future()
            queues.get(self_arg).put(_SingleRequest(
                self_arg, items[0], future, serve_context._get_serve_request_context()))
            return future

        if inspect.isasyncgenfunction(func):
            @wraps(func)
            async def wrapper(*args: Any, **kwargs: Any) -> Any:
                future = enqueue(args, kwargs)
                while True:
                    try:
                        step: _GeneratorResult = await future
                    except StopAsyncIteration:
                        return
                    future = step.next_future
                    yield step.result
        else:
            @wraps(func)
            async def wrapper(*args: Any, **kwargs: Any) -> Any:
                return await enqueue(args, kwargs)

        _attach_setters(wrapper, settings)
        return wrapper

    return decorator(_func) if callable(_func) else decorator


def _attach_setters(wrapper: Any, settings: _Settings) -> None:
    def set_max_batch_size(new_max_batch_size: int) -> None:
        settings.max_batch_size = _check_settings(new_max_batch_size, settings.batch_wait_timeout_s,
                                                  settings.max_concurrent_batches,
                                                  settings.batch_size_fn)

    def set_batch_wait_timeout_s(new_batch_wait_timeout_s: float) -> None:
        _check_timeout(new_batch_wait_timeout_s)
        settings.batch_wait_timeout_s = new_batch_wait_timeout_s

    wrapper.set_max_batch_size = set_max_batch_size
    wrapper.set_batch_wait_timeout_s = set_batch_wait_timeout_s
    wrapper._get_max_batch_size = lambda: settings.max_batch_size
    wrapper._get_batch_wait_timeout_s = lambda: settings.batch_wait_timeout_s


__all__ = ["batch"]
