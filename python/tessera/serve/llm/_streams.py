"""Async stream plumbing of the LLM server: merging the streams of a request's choices, and
Ray Serve LLM's stream batching.

    async for index, output in merge([stream_a, stream_b]): ...
    async for text in batched(events, interval_s=0.05): ...   # several events per item

Cancellation: both stop their sources when they are closed or cancelled, without awaiting
anything (a source is cancelled or closed synchronously), so they stop even inside a cancelled
AnyIO scope, where every await is cancelled again. The built-in engine's streams abort their
requests when the task reading them is cancelled.

Threading: one event loop. Cost: merge of several streams and batched: one task each.
"""

from __future__ import annotations

import asyncio
from typing import Any, AsyncGenerator, AsyncIterator, List, Sequence, Tuple

_END = object()


async def close_quietly(stream: Any) -> None:
    """Closes an async iterator that has aclose() (the engine's streams abort then)."""
    aclose = getattr(stream, "aclose", None)
    if aclose is not None:
        await aclose()


async def merge(streams: Sequence[AsyncIterator[Any]]) -> AsyncGenerator[Tuple[int, Any], None]:
    """(index of the stream, item) of every item of `streams`, as they come, until all ended;
    the first error of any ends it. Leaving early stops every stream."""
    if len(streams) == 1:
        try:
            async for item in streams[0]:
                yield 0, item
        finally:
            await close_quietly(streams[0])
        return
    queue: "asyncio.Queue[Tuple[int, Any, Any]]" = asyncio.Queue()

    async def pump(index: int, stream: AsyncIterator[Any]) -> None:
        try:
            async for item in stream:
                queue.put_nowait((index, item, None))
        except Exception as e:  # handed to the consumer, which raises it
            queue.put_nowait((index, None, e))
            return
        queue.put_nowait((index, _END, None))

    tasks: List[asyncio.Future] = [asyncio.ensure_future(pump(i, s))
                                   for i, s in enumerate(streams)]
    try:
        remaining = len(tasks)
        while remaining:
            index, item, error = await queue.get()
            if error is not None:
                raise error
            if item is _END:
                remaining -= 1
                continue
            yield index, item
    finally:
        for task in tasks:
            task.cancel()  # a cancelled pump's stream gets CancelledError: its request aborts


async def batched(source: AsyncIterator[str], interval_s: float) -> AsyncGenerator[str, None]:
    """Ray Serve LLM's stream batching: the first item as soon as it is ready (time to first
    token matters), then every `interval_s` all the items that arrived, joined; with
    `interval_s` <= 0 each item alone. An error of `source` is raised after the items before
    it."""
    if interval_s <= 0:
        async for item in source:
            yield item
        return
    pending: List[str] = []
    arrived = asyncio.Event()

    async def read() -> None:
        try:
            async for item in source:
                pending.append(item)
                arrived.set()
        finally:
            arrived.set()

    reader = asyncio.ensure_future(read())
    try:
        await arrived.wait()
        while True:
            # Whether the reader ended before this drain (items cannot come after it ended; some
            # may come while the consumer holds the yielded batch).
            ended = reader.done()
            if pending:
                joined = "".join(pending)
                pending.clear()
                yield joined
            if ended:
                reader.result()  # raises the source's error
                return
            await asyncio.wait({reader}, timeout=interval_s)
    finally:
        reader.cancel()
