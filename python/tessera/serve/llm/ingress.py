"""`OpenAiIngress`, Serve LLM's OpenAI-compatible HTTP front (Ray's
`ray.serve.llm.ingress.OpenAiIngress`): FastAPI routes that check each request and hand it to the
LLMServer deployment of its model through a DeploymentHandle.

    ingress_cls = make_fastapi_ingress(OpenAiIngress)       # the class with its FastAPI app
    app = serve.deployment(ingress_cls).bind(llm_deployments={"demo": llm_server_app})

Routes (under the application's route prefix):
  GET  /v1/models                the served models ({"object": "list", "data": [cards]})
  GET  /v1/models/{model}        one card; 404 (type InvalidModel) for another id
  POST /v1/completions           \\ the body is checked (openai_protocol: a malformed one is
  POST /v1/chat/completions      / Ray's 400), its model chosen (none named: the only one,
                                 else 400; an unknown base model 404; `base:adapter` goes to
                                 the base model's deployment with the adapter as its
                                 multiplexed model id, where it is refused with vLLM's 404),
                                 then sent to that model's handle with stream=True.

The model's first item decides the response: an error body is a plain JSON error response with
its status (`code`); a whole response is JSON; SSE text starts a text/event-stream response
that relays every item and ends with one `data: [DONE]\\n\\n`. An error after the stream started
is an in-band error event. The first item must come within RAY_SERVE_LLM_ROUTER_HTTP_TIMEOUT
(600 s), else 408 "Request server side timeout". A client that goes away cancels the response
(its generator gets CancelledError), which cancels the model's stream, which aborts the engine
requests.

`llm_deployments` maps model ids to DeploymentHandles (anything with Ray's handle API:
`options(stream=..., multiplexed_model_id=...)`, `handle.chat.remote(body)` returning an async
iterator, with `cancel()` or `aclose()` to stop it), so tests can serve with stand-ins.

Threading: the replica's event loop. Cost: a JSON parse and check per request; a handle per
model (kept), per adapter request one more.
"""

import asyncio
import logging
import time
import types
import uuid
from typing import Any, AsyncGenerator, Callable, Dict, List, Mapping, Optional

from fastapi import FastAPI
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse

from tessera import serve
from tessera.serve import context as serve_context
from tessera.serve._constants import SERVE_LOGGER_NAME
from tessera.serve.llm import _constants
from tessera.serve.llm import openai_protocol as proto

logger = logging.getLogger(SERVE_LOGGER_NAME)

_DONE = proto.SSE_DONE.decode("ascii")
_METHODS = {proto.CHAT: "chat", proto.COMPLETION: "completions"}


class OpenAiIngress:
    """The OpenAI routes over LLMServer deployments (see the module doc). `model_cards`: the
    model list's entries by model id (default: one card each, created now)."""

    def __init__(self, llm_deployments: Mapping[str, Any],
                 model_cards: Optional[Mapping[str, Dict[str, Any]]] = None) -> None:
        if not isinstance(llm_deployments, Mapping) or not llm_deployments:
            raise ValueError("llm_deployments must be a non-empty dict of model id to "
                             f"DeploymentHandle, got {llm_deployments!r}")
        created = int(time.time())
        cards = dict(model_cards) if model_cards is not None else {
            model_id: proto.model_card(model_id, created) for model_id in llm_deployments}
        if set(cards) != set(llm_deployments):
            raise ValueError("llm_deployments and model_cards must have the same model IDs. "
                             f"Got llm_deployments={sorted(llm_deployments)}, "
                             f"model_cards={sorted(cards)}.")
        self._handles: Dict[str, Any] = dict(llm_deployments)
        self._model_cards = cards
        self._timeout_s = _constants.router_http_timeout_s()
        # Handles configured for streaming, one per base model (`.options` makes a new handle:
        # make it once). Adapter ids come from clients, so theirs are not kept.
        self._streaming: Dict[str, Any] = {}

    async def check_health(self) -> None:
        pass

    @classmethod
    def get_deployment_options(cls, llm_configs: Optional[List[Any]] = None) -> Dict[str, Any]:
        """The ingress deployment's default options: Serve LLM's, with min_replicas 0 when
        every model may scale to zero."""
        options = _constants.ingress_deployment_defaults()
        if llm_configs and all(_min_replicas(c) == 0 for c in llm_configs):
            options["autoscaling_config"]["min_replicas"] = 0
        return options

    # ---- routes (bound by make_fastapi_ingress) ------------------------------------------

    async def models(self) -> Response:
        return JSONResponse({"object": "list", "data": list(self._model_cards.values())})

    async def model_data(self, model: str) -> Response:
        # Ray also takes "--" for "/" in a model id inside a URL path segment.
        card = self._model_cards.get(model) or self._model_cards.get(model.replace("--", "/"))
        if card is None:
            return _error_response(proto.OpenAIError(
                404, f"Unable to find {model}. Please ensure that the model exists and you have "
                     "permission.", "InvalidModel"))
        return JSONResponse(card)

    async def completions(self, request: Request) -> Response:
        return await self._process(request, proto.COMPLETION)

    async def chat(self, request: Request) -> Response:
        return await self._process(request, proto.CHAT)

    # ---- requests ------------------------------------------------------------------------

    def _handle_for(self, model: str) -> Any:
        base = model.split(":", 1)[0]
        if model != base:
            return self._handles[base].options(stream=True, multiplexed_model_id=model)
        handle = self._streaming.get(base)
        if handle is None:
            handle = self._handles[base].options(stream=True)
            self._streaming[base] = handle
        return handle

    async def _process(self, request: Request, kind: str) -> Response:
        request_id = _request_id(request)
        stream = None
        try:
            body = proto.parse_json_body(await request.body())
            parse = (proto.parse_chat_request if kind == proto.CHAT
                     else proto.parse_completion_request)
            model = proto.select_model(parse(body).model, list(self._handles), request_id)
            method = getattr(self._handle_for(model), _METHODS[kind])
            stream = method.remote({**body, "model": model})
            first = await asyncio.wait_for(_first_item(stream), self._timeout_s)
        except proto.OpenAIError as e:
            return _error_response(e)
        except asyncio.CancelledError:  # the client went away
            await _stop(stream)
            raise
        except asyncio.TimeoutError:
            await _stop(stream)
            return _error_response(proto.OpenAIError(
                408, f"Request server side timeout (Request ID: {request_id})",
                "OpenAIHTTPException"))
        except Exception as e:  # the handle call failed (e.g. the model's replica died)
            await _stop(stream)
            return _error_response(_internal_error(e, request_id))
        if isinstance(first, Mapping):
            error = first.get("error")
            if isinstance(error, Mapping):
                return JSONResponse(dict(first), status_code=_status_of(error))
            return JSONResponse(dict(first))
        return StreamingResponse(_event_stream(first, stream, request_id),
                                 media_type="text/event-stream")


def _min_replicas(llm_config: Any) -> Optional[int]:
    autoscaling = llm_config.deployment_config.get("autoscaling_config")
    if isinstance(autoscaling, Mapping):
        return autoscaling.get("min_replicas")
    return getattr(autoscaling, "min_replicas", None)


async def _first_item(stream: Any) -> Any:
    try:
        return await stream.__anext__()
    except StopAsyncIteration:
        raise RuntimeError("The model's response ended before its first item") from None


async def _event_stream(first: Any, stream: Any, request_id: str) -> AsyncGenerator[str, None]:
    """The SSE body: the first item, every later one, then [DONE] unless an item ended with it.
    Leaving early (the client went away: CancelledError) stops the model's stream."""
    done = False
    finished = False
    try:
        item = first
        while True:
            text = _event_text(item)
            done = done or text.rstrip().endswith("data: [DONE]")
            yield text
            try:
                item = await stream.__anext__()
            except StopAsyncIteration:
                finished = True
                break
    except Exception as e:  # mid-stream: the client already has a 200, so the error goes in-band
        finished = True
        await _stop(stream)
        yield _event_text(_internal_error(e, request_id).body())
    finally:
        if not finished:
            await _stop(stream)
    if not done:
        yield _DONE


def _event_text(item: Any) -> str:
    if isinstance(item, list):  # a batch of events
        return "".join(_event_text(part) for part in item)
    if isinstance(item, str):
        return item
    if isinstance(item, (bytes, bytearray)):
        return bytes(item).decode("utf-8")
    return proto.sse(item).decode("utf-8")  # a dict: a chunk or an error body


async def _stop(stream: Any) -> None:
    """Stops a model stream we no longer read: `cancel()` (a handle's response generator:
    synchronous, so it works inside a cancelled AnyIO scope) or `aclose()`."""
    if stream is None:
        return
    cancel = getattr(stream, "cancel", None)
    if callable(cancel):
        cancel()
        return
    aclose = getattr(stream, "aclose", None)
    if aclose is not None:
        await aclose()


def _request_id(request: Request) -> str:
    return (serve_context._get_serve_request_context().request_id
            or request.headers.get("x-request-id") or str(uuid.uuid4()))


def _status_of(error: Mapping[str, Any]) -> int:
    code = error.get("code")
    return code if isinstance(code, int) and 400 <= code <= 599 else 500


def _internal_error(error: Exception, request_id: str) -> proto.OpenAIError:
    """Ray's answer to an unexpected failure: its status_code if it has one, else 500 with
    the cause logged and not shown."""
    status = getattr(error, "status_code", None)
    if isinstance(status, int) and 400 <= status <= 599 and status != 500:
        return proto.OpenAIError(status, f"{error} (Request ID: {request_id})",
                                 type(error).__name__)
    logger.error("Request %s failed", request_id, exc_info=error)
    return proto.OpenAIError(500, f"Internal Server Error (Request ID: {request_id})",
                             "InternalServerError")


def _error_response(error: proto.OpenAIError) -> Response:
    return JSONResponse(error.body(), status_code=error.status)


# ---- the FastAPI app ------------------------------------------------------------------------

DEFAULT_ENDPOINTS: Dict[str, Callable[[FastAPI], Callable]] = {
    "models": lambda app: app.get("/v1/models"),
    "model_data": lambda app: app.get("/v1/models/{model:path}"),
    "completions": lambda app: app.post("/v1/completions"),
    "chat": lambda app: app.post("/v1/chat/completions"),
}


def _route_copy(cls: type, name: str) -> Callable:
    """A copy of method `name` of `cls` named as the class's own (the class-based view binds
    the routes whose functions are named after the class), so each app has its own function
    and a subclass's inherited routes are its own."""
    function = getattr(cls, name)
    clone = types.FunctionType(function.__code__, function.__globals__, name,
                               function.__defaults__, function.__closure__)
    clone.__kwdefaults__ = function.__kwdefaults__
    clone.__annotations__ = dict(function.__annotations__)
    clone.__doc__ = function.__doc__
    clone.__module__ = cls.__module__
    clone.__qualname__ = f"{cls.__qualname__}.{name}"
    return clone


def make_fastapi_ingress(cls: type, *,
                         endpoint_map: Optional[Dict[str, Callable[[FastAPI], Callable]]] = None,
                         app: Optional[FastAPI] = None) -> type:
    """An @serve.ingress subclass of `cls` whose methods named in `endpoint_map` (method name
    -> a function of the app giving its route decorator; default DEFAULT_ENDPOINTS) are routes
    of `app` (default: a new FastAPI app)."""
    app = app if app is not None else FastAPI()
    routes = {name: route(app)(_route_copy(cls, name))
              for name, route in (endpoint_map or DEFAULT_ENDPOINTS).items()}
    subclass = type(cls.__name__, (cls,), routes)
    subclass.__qualname__ = cls.__qualname__
    subclass.__module__ = cls.__module__
    return serve.ingress(app)(subclass)


__all__ = ["DEFAULT_ENDPOINTS", "OpenAiIngress", "make_fastapi_ingress"]
