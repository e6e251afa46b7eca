"""`@serve.multiplexed`: many models per deployment, a few loaded on each replica.

    @serve.multiplexed(max_num_models_per_replica=3)
    async def get_model(self, model_id: str):
        return await load(model_id)

    async def __call__(self, request):
        model = await self.get_model(serve.get_multiplexed_model_id())

As Ray Serve's: the loader must be `async def` taking exactly one `model_id: str` (plus self); a
call returns the cached model, or loads it (one load at a time per replica), evicting the least
recently used model first when `max_num_models_per_replica` are loaded (-1: no limit). Eviction
calls the model's `__del__` (awaited when it is a coroutine function, else run in a thread) so
it frees its resources at once. The request's model id is `get_multiplexed_model_id()` ("" when
none): a handle's `options(multiplexed_model_id=...)`, or the HTTP header
`serve_multiplexed_model_id`. Loaders must run inside a replica (the cache is the replica's; the
replica reports the ids it holds for routing).

Threading: on the replica's event loop. Cost: a dict move per cache hit.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
from collections import OrderedDict
from functools import wraps
from typing import Any, Callable, List, Optional, Set

from tessera.serve import context as serve_context
from tessera.serve._constants import SERVE_LOGGER_NAME

logger = logging.getLogger(SERVE_LOGGER_NAME)

_ARGS_ERROR = ("Functions decorated with `@serve.multiplexed` must take exactly one the "
               "multiplexed model ID (str), but got {}")


class _ModelMultiplexWrapper:
    """One replica's LRU cache of one loader's models."""

    def __init__(self, load: Callable, self_arg: Any, max_num_models_per_replica: int) -> None:
        context = serve_context._get_internal_replica_context()
        if context is None:
            raise RuntimeError("`@serve.multiplex` can only be used within a deployment "
                               "(failed to retrieve Serve replica context).")
        self.models: "OrderedDict[str, Any]" = OrderedDict()
        self._load = load
        self._self_arg = self_arg
        self.max_num_models_per_replica = max_num_models_per_replica
        self._lock = asyncio.Lock()
        self._loading: Set[str] = set()
        context._multiplexers.append(self)

    def model_ids(self) -> List[str]:
        """The ids loaded or being loaded (routing prefers this replica for them)."""
        return sorted(set(self.models) | self._loading)

    async def load_model(self, model_id: str) -> Any:
        if type(model_id) is not str:
            raise TypeError("The model ID must be a string.")
        if not model_id:
            raise ValueError("The model ID cannot be empty.")
        if model_id in self.models:
            self.models.move_to_end(model_id)
            return self.models[model_id]
        self._loading.add(model_id)
        try:
            async with self._lock:
                if model_id in self.models:  # another request loaded it meanwhile
                    self.models.move_to_end(model_id)
                    return self.models[model_id]
                limit = self.max_num_models_per_replica
                while limit > 0 and len(self.models) >= limit:
                    await self.unload_model_lru()
                logger.info("Loading model '%s'.", model_id)
                if self._self_arg is None:
                    model = await self._load(model_id)
                else:
                    model = await self._load(self._self_arg, model_id)
                self.models[model_id] = model
                return model
        finally:
            self._loading.discard(model_id)

    async def unload_model_lru(self) -> None:
        """Evicts the least recently used model, calling its __del__ now."""
        model_id, model = self.models.popitem(last=False)
        logger.info("Unloading model '%s'.", model_id)
        destructor = getattr(model, "__del__", None)
        if destructor is None:
            return
        if inspect.iscoroutinefunction(destructor):
            await destructor()
        else:
            await asyncio.get_running_loop().run_in_executor(None, destructor)

    async def shutdown(self) -> None:
        """Unloads every model (the replica is shutting down)."""
        while self.models:
            try:
                await self.unload_model_lru()
            except Exception:
                logger.exception("Failed to unload a model.")


def _self_of(args: tuple, func: Callable) -> Any:
    if args:
        method = getattr(args[0], func.__name__, None)
        if method is not None and getattr(method, "__wrapped__", None) is func:
            return args[0]
    return None


def _check_loader(func: Any) -> None:
    if not callable(func):
        raise TypeError("The `multiplexed` decorator must be used with a function or method.")
    if not inspect.iscoroutinefunction(func):
        raise TypeError("@serve.multiplexed can only be used to decorate async functions or "
                        "methods.")
    parameters = inspect.signature(func).parameters
    if len(parameters) == 0 or len(parameters) > 2:
        raise TypeError("@serve.multiplexed can only be used to decorate functions or methods "
                        "with at least one 'model_id: str' argument.")


def multiplexed(func: Optional[Callable] = None, max_num_models_per_replica: int = 3) -> Any:
    """Wraps an async model loader with a per-replica LRU cache of `max_num_models_per_replica`
    models (-1: no limit). Bare or with the limit."""
    if func is not None:
        _check_loader(func)
    if not isinstance(max_num_models_per_replica, int) or isinstance(max_num_models_per_replica,
                                                                     bool):
        raise TypeError("max_num_models_per_replica must be an integer.")
    if max_num_models_per_replica != -1 and max_num_models_per_replica <= 0:
        raise ValueError("max_num_models_per_replica must be positive.")

    def decorator(load: Callable) -> Callable:
        _check_loader(load)
        attribute = f"__serve_multiplex_wrapper_{load.__name__}"

        @wraps(load)
        async def wrapper(*args: Any) -> Any:
            if not args:
                raise TypeError(_ARGS_ERROR.format("no arguments are provided."))
            self_arg = _self_of(args, load)
            if len(args) != (1 if self_arg is None else 2):
                raise TypeError(_ARGS_ERROR.format("more than one arguments."))
            # A method's cache lives on its instance; a function's on the replica running it.
            owner = serve_context._get_internal_replica_context() if self_arg is None else self_arg
            cache = getattr(owner, attribute, None)
            if cache is None:
                cache = _ModelMultiplexWrapper(load, self_arg, max_num_models_per_replica)
                setattr(owner, attribute, cache)
            return await cache.load_model(args[-1])

        return wrapper

    return decorator(func) if callable(func) else decorator


def get_multiplexed_model_id() -> str:
    """The multiplexed model id of the current request ("" when it names none)."""
    return serve_context._get_serve_request_context().multiplexed_model_id


__all__ = ["get_multiplexed_model_id", "multiplexed"]
