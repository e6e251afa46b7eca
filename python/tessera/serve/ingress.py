"""`@serve.ingress(app)`: a deployment class that serves HTTP through an ASGI app (FastAPI, an
APIRouter, any ASGI callable, or a zero-argument builder returning one, called on the replica).

    app = FastAPI()

    @serve.deployment
    @serve.ingress(app)
    class Api:
        @app.get("/hi")
        def hi(self) -> str:          # `self` is the replica's instance
            return "hello"

As Ray's: the class must not define __call__; routes whose endpoints are the class's methods get
the replica's instance as `self` (a FastAPI dependency); the app's routes are frozen when it is
decorated, so routes added later do not change this deployment (Ray freezes a pickled copy;
here the routes are recorded and the replica serves a copy of the app with them, so nothing is
pickled before the module has finished loading). The app's lifespan (startup and shutdown
events) runs when the replica starts and when it shuts down.

Threading: the wrapper's methods run on the replica's event loop. Cost: a list of the routes
at decoration; a shallow copy of the app when a replica starts.
"""

from __future__ import annotations

import asyncio
import collections.abc
import copy
import inspect
import logging
from typing import Any, Callable, Optional

from tessera.serve._constants import SERVE_LOGGER_NAME
from tessera.serve.exceptions import RayServeException

logger = logging.getLogger(SERVE_LOGGER_NAME)


async def get_current_servable_instance() -> Any:
    """The FastAPI dependency that gives a class-based route its `self`."""
    from tessera.serve.context import get_replica_context

    return get_replica_context().servable_object


def make_fastapi_class_based_view(fastapi_app: Any, cls: type) -> None:
    """Turns the routes of `fastapi_app` whose endpoints are methods of `cls` into routes that
    get the replica's instance as `self` (their other parameters become keyword-only), and drops
    the routes other ingress classes claimed."""
    from fastapi import APIRouter, Depends
    from fastapi.routing import APIRoute, APIWebSocketRoute

    prefix = cls.__qualname__ + "."
    class_routes = [route for route in fastapi_app.routes
                    if isinstance(route, (APIRoute, APIWebSocketRoute))
                    and route.endpoint.__qualname__.startswith(prefix)]
    new_router = APIRouter()
    for route in class_routes:
        fastapi_app.routes.remove(route)
        signature = inspect.signature(route.endpoint)
        parameters = list(signature.parameters.values())
        if not parameters:
            raise RayServeException("Methods in FastAPI class-based view must have ``self`` as "
                                    "their first argument.")
        self_parameter = parameters[0].replace(default=Depends(get_current_servable_instance))
        rest = [p.replace(kind=inspect.Parameter.KEYWORD_ONLY) for p in parameters[1:]]
        route.endpoint.__signature__ = signature.replace(parameters=[self_parameter, *rest])
        route.endpoint._serve_cls = cls
        new_router.routes.append(route)
    fastapi_app.include_router(new_router)
    kept = []
    for route in fastapi_app.routes:
        if isinstance(route, APIRoute) and route.response_model is not None:
            # FastAPI (with pydantic 1) clones the response field without its outer type.
            route.secure_cloned_response_field.outer_type_ = route.response_field.outer_type_
        owner = getattr(getattr(route, "endpoint", None), "_serve_cls", None)
        if owner is None or owner is cls:
            kept.append(route)
    fastapi_app.routes[:] = kept


class _Lifespan:
    """Runs an ASGI app's lifespan protocol: startup() before the first request, shutdown()
    at the end. An app that does not speak it (raises on a lifespan scope) is served without."""

    def __init__(self, app: Any) -> None:
        self._app = app
        self.state: dict = {}
        self._task: Optional[asyncio.Task] = None

    async def startup(self) -> None:
        self._inbox: asyncio.Queue = asyncio.Queue()
        self._outbox: asyncio.Queue = asyncio.Queue()
        self._task = asyncio.get_running_loop().create_task(self._run())
        self._inbox.put_nowait({"type": "lifespan.startup"})
        reply = await self._outbox.get()
        if reply is not None and reply["type"] == "lifespan.startup.failed":
            raise RuntimeError(f"ASGI lifespan startup failed: {reply.get('message', '')}")

    async def shutdown(self) -> None:
        if self._task is None or self._task.done():
            return
        self._inbox.put_nowait({"type": "lifespan.shutdown"})
        reply = await self._outbox.get()
        if reply is not None and reply["type"] == "lifespan.shutdown.failed":
            logger.error("ASGI lifespan shutdown failed: %s", reply.get("message", ""))
        await asyncio.gather(self._task, return_exceptions=True)

    async def _run(self) -> None:
        scope = {"type": "lifespan", "asgi": {"version": "3.0", "spec_version": "2.0"},
                 "state": self.state}
        try:
            await self._app(scope, self._inbox.get, self._send)
        except Exception:
            logger.debug("The ASGI app does not support the lifespan protocol", exc_info=True)
        finally:
            self._outbox.put_nowait(None)

    async def _send(self, message: dict) -> None:
        self._outbox.put_nowait(message)


class ASGIAppReplicaWrapper:
    """The base an @serve.ingress class gets: holds the ASGI app the replica serves HTTP with
    (`_serve_asgi_app`), and runs its lifespan."""

    def __init__(self, app_or_builder: Any) -> None:
        if isinstance(app_or_builder, _FrozenApp):
            app = app_or_builder.thaw()
        else:
            app = app_or_builder()
        self._serve_asgi_app = app
        self._serve_asgi_lifespan = _Lifespan(app)

    async def _serve_asgi_startup(self) -> None:
        await self._serve_asgi_lifespan.startup()

    async def _serve_asgi_shutdown(self) -> None:
        await self._serve_asgi_lifespan.shutdown()


class _FrozenApp:
    """The app as decorated: its routes then. Later routes are not served (the replica serves a
    copy with these routes), as Ray freezes the app when it decorates the class. The app is
    kept, not copied, until it is pickled with the deployment, so its endpoints capture their
    module's globals as they are then (helpers defined below the class included)."""

    def __init__(self, app: Any) -> None:
        self.app = app
        self.routes = list(_router_of(app).routes) if _router_of(app) is not None else None

    def thaw(self) -> Any:
        """The app to serve: a copy of the app with its routes of decoration time."""
        if self.routes is None:
            return self.app
        app = copy.copy(self.app)
        router = copy.copy(_router_of(app))
        router.routes = list(self.routes)
        if router is app:
            return router
        app.router = router
        if hasattr(app, "middleware_stack"):
            app.middleware_stack = None  # built again, over the copied router
        return app


def _router_of(app: Any) -> Any:
    """The Starlette router holding an app's routes (the app itself when it is a router)."""
    try:
        from starlette.routing import Router
    except ImportError:
        return None
    if isinstance(app, Router):
        return app
    router = getattr(app, "router", None)
    return router if isinstance(router, Router) else None


def _freeze(app: Any) -> Any:
    """A builder function as is (called on the replica); an app as a _FrozenApp."""
    return app if inspect.isfunction(app) else _FrozenApp(app)


def _is_fastapi(app: Any) -> bool:
    try:
        from fastapi import APIRouter, FastAPI
    except ImportError:
        return False
    return isinstance(app, (FastAPI, APIRouter))


def ingress(app: Any) -> Callable:
    """Wraps a deployment class with an ASGI app for HTTP: a FastAPI app or APIRouter (the
    class's methods can be its routes), any ASGI callable, or a builder function returning one
    (evaluated on each replica)."""

    def decorator(cls: Optional[type] = None) -> type:
        if cls is None:
            class ASGIIngressDeployment:
                def __init__(self, *args: Any, **kwargs: Any) -> None:
                    self.args = args
                    self.kwargs = kwargs

            cls = ASGIIngressDeployment
        if not inspect.isclass(cls):
            raise ValueError("@serve.ingress must be used with a class.")
        if issubclass(cls, collections.abc.Callable):
            raise ValueError("Classes passed to @serve.ingress may not have __call__ method.")
        if _is_fastapi(app):
            make_fastapi_class_based_view(app, cls)
        frozen = _freeze(app)
        user_cls = cls

        class ASGIIngressWrapper(user_cls, ASGIAppReplicaWrapper):  # type: ignore[valid-type,misc]
            def __init__(self, *args: Any, **kwargs: Any) -> None:
                user_cls.__init__(self, *args, **kwargs)
                ASGIAppReplicaWrapper.__init__(self, frozen)

        for attribute in ("__name__", "__qualname__", "__module__", "__doc__"):
            setattr(ASGIIngressWrapper, attribute, getattr(user_cls, attribute))
        return ASGIIngressWrapper

    return decorator


__all__ = ["ASGIAppReplicaWrapper", "ingress"]
