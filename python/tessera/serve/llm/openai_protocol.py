"""The OpenAI protocol of Serve LLM as pure functions over dicts: request checks for
/v1/completions and /v1/chat/completions, model selection, response and streaming-chunk
builders, the model list, and error bodies, with the shapes Ray Serve LLM (vLLM's protocol)
gives.

    request = parse_chat_request(body, model_ids=["tiny"])        # OpenAIError when bad
    ...run request.n choices with SamplingParams(**sampling_kwargs(request, i))...
    response = chat_completion_response(new_request_id("chat"), request.model, created,
                                        [Choice(0, text, "stop", None)], usage(p, c))
    events = [sse(chat_chunk(...)), ..., SSE_DONE]

Errors: `OpenAIError.status` is the HTTP status and `body()` is {"error": {"message", "type",
"param", "code"}}. A malformed request is 400 as Ray's middleware words it: message
"Invalid request format: <pydantic message> at <location>", type the pydantic error type,
param the offending input, code "invalid_parameter". Model selection errors carry the HTTP
status as code and the exception class Ray raises (HTTPException) as type: no model named with
several served is 400, an unknown base model 404. Unknown request fields are ignored (vLLM's
protocol allows extra fields).

Threading: pure; any thread. Cost: O(request size).
"""

from __future__ import annotations

import dataclasses
import json
import uuid
from typing import Any, Dict, List, Mapping, NamedTuple, Optional, Sequence, Tuple, Union

from tessera.serve.llm.tokenizer import CHAT_ROLES

MAX_STOP_SEQUENCES = 8
MAX_TOP_LOGPROBS = 5
SSE_DONE = b"data: [DONE]\n\n"
CHAT = "chat"
COMPLETION = "completion"
_MISSING = object()


class OpenAIError(Exception):
    def __init__(self, status: int, message: str, type: str, param: Any = None,
                 code: Union[int, str, None] = None) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.type = type
        self.param = param
        self.code = status if code is None else code

    def body(self) -> Dict[str, Any]:
        return {"error": {"message": self.message, "type": self.type, "param": self.param,
                          "code": self.code}}


def invalid(message: str, location: Tuple[Any, ...], error_type: str, value: Any) -> OpenAIError:
    """A 400 for a malformed request, worded as Ray's validation handler words pydantic's."""
    return OpenAIError(400, f"Invalid request format: {message} at {location}", error_type,
                       param=value, code="invalid_parameter")


def http_error(status: int, message: str, request_id: Optional[str] = None) -> OpenAIError:
    """An error Ray raises as fastapi's HTTPException (model selection, timeouts)."""
    suffix = f" (Request ID: {request_id})" if request_id else ""
    return OpenAIError(status, message + suffix, "HTTPException")


def parse_json_body(raw: bytes) -> Any:
    """The JSON of a request body; a 400 for bytes that are not JSON."""
    try:
        return json.loads(raw)
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        position = getattr(e, "pos", 0)
        raise invalid("JSON decode error", ("body", position), "json_invalid", {}) from None


# ---- request checks ------------------------------------------------------------------------

class _Fields:
    """Reads and checks one JSON object's fields, naming them by location as pydantic does."""

    def __init__(self, data: Any, location: Tuple[Any, ...]) -> None:
        if not isinstance(data, Mapping):
            raise invalid("Input should be a valid dictionary or object to extract fields from",
                          location, "model_attributes_type", data)
        self.data = data
        self.location = location

    def raw(self, name: str) -> Any:
        return self.data.get(name, _MISSING)

    def required(self, name: str) -> Any:
        if name not in self.data:
            raise invalid("Field required", self.location + (name,), "missing", dict(self.data))
        return self.data[name]

    def fail(self, name: str, message: str, error_type: str) -> OpenAIError:
        return invalid(message, self.location + (name,), error_type, self.data.get(name))

    def string(self, name: str, default: Any = None) -> Optional[str]:
        value = self.data.get(name, default)
        if value is not None and not isinstance(value, str):
            raise self.fail(name, "Input should be a valid string", "string_type")
        return value

    def boolean(self, name: str, default: bool) -> bool:
        value = self.data.get(name)
        if value is None:
            return default
        if not isinstance(value, bool):
            raise self.fail(name, "Input should be a valid boolean", "bool_type")
        return value

    def integer(self, name: str, minimum: Optional[int] = None,
                maximum: Optional[int] = None) -> Optional[int]:
        value = self.data.get(name)
        if value is None:
            return None
        if isinstance(value, float) and value.is_integer():
            value = int(value)
        if not isinstance(value, int) or isinstance(value, bool):
            raise self.fail(name, "Input should be a valid integer", "int_type")
        self._bounds(name, value, minimum, maximum)
        return value

    def number(self, name: str, minimum: Optional[float] = None,
               maximum: Optional[float] = None, above: Optional[float] = None
               ) -> Optional[float]:
        value = self.data.get(name)
        if value is None:
            return None
        if not isinstance(value, (int, float)) or isinstance(value, bool):
            raise self.fail(name, "Input should be a valid number", "float_type")
        if above is not None and not value > above:
            raise self.fail(name, f"Input should be greater than {above}", "greater_than")
        self._bounds(name, value, minimum, maximum)
        return float(value)

    def _bounds(self, name: str, value: float, minimum: Optional[float],
                maximum: Optional[float]) -> None:
        if minimum is not None and value < minimum:
            raise self.fail(name, f"Input should be greater than or equal to {minimum}",
                            "greater_than_equal")
        if maximum is not None and value > maximum:
            raise self.fail(name, f"Input should be less than or equal to {maximum}",
                            "less_than_equal")


@dataclasses.dataclass
class ParsedRequest:
    """A checked /v1/chat/completions or /v1/completions request. `prompts` holds the
    completion prompts (a text or token ids each); `messages` the chat messages."""

    kind: str
    model: Optional[str]
    messages: Optional[List[Dict[str, Any]]]
    prompts: Optional[List[Union[str, List[int]]]]
    n: int
    stream: bool
    include_usage: bool
    continuous_usage_stats: bool
    sampling: Dict[str, Any]
    user: Optional[str] = None


def parse_chat_request(body: Any) -> ParsedRequest:
    """Checks a /v1/chat/completions body (see the module's doc for the errors)."""
    fields = _Fields(body, ("body",))
    messages = _messages(fields)
    return _parse_common(fields, CHAT, messages=messages, prompts=None)


def parse_completion_request(body: Any) -> ParsedRequest:
    """Checks a /v1/completions body (see the module's doc for the errors)."""
    fields = _Fields(body, ("body",))
    prompts = _prompts(fields)
    return _parse_common(fields, COMPLETION, messages=None, prompts=prompts)


def _parse_common(fields: _Fields, kind: str, messages: Optional[List[Dict[str, Any]]],
                  prompts: Optional[List[Union[str, List[int]]]]) -> ParsedRequest:
    model = fields.string("model")
    stream = fields.boolean("stream", False)
    include_usage, continuous = _stream_options(fields, stream)
    n = fields.integer("n", minimum=1)
    _logprobs(fields, kind)
    return ParsedRequest(kind=kind, model=model, messages=messages, prompts=prompts,
                         n=1 if n is None else n, stream=stream, include_usage=include_usage,
                         continuous_usage_stats=continuous, sampling=_sampling(fields, kind),
                         user=fields.string("user"))


def _messages(fields: _Fields) -> List[Dict[str, Any]]:
    messages = fields.required("messages")
    if not isinstance(messages, list):
        raise fields.fail("messages", "Input should be a valid list", "list_type")
    out = []
    for i, message in enumerate(messages):
        item = _Fields(message, ("body", "messages", i))
        role = item.required("role")
        if role not in CHAT_ROLES:
            allowed = ", ".join(f"'{r}'" for r in CHAT_ROLES[:-1]) + f" or '{CHAT_ROLES[-1]}'"
            raise item.fail("role", f"Input should be {allowed}", "literal_error")
        content = item.raw("content")
        if content is _MISSING and role != "assistant":
            item.required("content")
        if content is not _MISSING and content is not None and not _is_content(content):
            raise item.fail("content", "Input should be a valid string or a list of content "
                            "parts", "string_type")
        out.append(dict(message))
    return out


def _is_content(content: Any) -> bool:
    if isinstance(content, str):
        return True
    return isinstance(content, list) and all(
        isinstance(p, dict) and isinstance(p.get("type"), str) for p in content)


def _prompts(fields: _Fields) -> List[Union[str, List[int]]]:
    prompt = fields.required("prompt")
    if isinstance(prompt, str):
        return [prompt]
    if isinstance(prompt, list) and prompt:
        if all(isinstance(p, str) for p in prompt):
            return list(prompt)
        if all(_is_token_ids(p) for p in prompt):
            return [list(p) for p in prompt]
        if _is_token_ids(prompt):
            return [list(prompt)]
    raise fields.fail("prompt", "Input should be a valid string, a list of strings, a list of "
                      "token ids or a list of lists of token ids", "string_type")


def _is_token_ids(value: Any) -> bool:
    return isinstance(value, list) and bool(value) and all(
        isinstance(t, int) and not isinstance(t, bool) and t >= 0 for t in value)


def _stream_options(fields: _Fields, stream: bool) -> Tuple[bool, bool]:
    options = fields.data.get("stream_options")
    if options is None:
        return False, False
    if not stream:
        raise invalid("Value error, Stream options can only be defined when `stream=True`.",
                      ("body",), "value_error", dict(fields.data))
    item = _Fields(options, ("body", "stream_options"))
    return item.boolean("include_usage", False), item.boolean("continuous_usage_stats", False)


def _logprobs(fields: _Fields, kind: str) -> None:
    if kind == CHAT:
        fields.boolean("logprobs", False)
        fields.integer("top_logprobs", minimum=0, maximum=MAX_TOP_LOGPROBS)
    else:
        fields.integer("logprobs", minimum=0, maximum=MAX_TOP_LOGPROBS)


def _sampling(fields: _Fields, kind: str) -> Dict[str, Any]:
    """The SamplingParams keyword arguments of a request (defaults left to SamplingParams,
    except max_tokens, whose absence means up to the model's length)."""
    max_tokens = fields.integer("max_tokens", minimum=1)
    if kind == CHAT:
        newer = fields.integer("max_completion_tokens", minimum=1)
        max_tokens = newer if newer is not None else max_tokens
    out: Dict[str, Any] = {"max_tokens": max_tokens}
    temperature = fields.number("temperature", minimum=0, maximum=2)
    top_p = fields.number("top_p", above=0, maximum=1)
    top_k = fields.integer("top_k", minimum=-1)
    seed = fields.integer("seed")
    for name, value in (("temperature", temperature), ("top_p", top_p), ("top_k", top_k),
                        ("seed", seed)):
        if value is not None:
            out[name] = value
    stop = _stop(fields)
    if stop:
        out["stop"] = stop
    stop_token_ids = fields.data.get("stop_token_ids")
    if stop_token_ids is not None:
        if not _is_token_ids(stop_token_ids):
            raise fields.fail("stop_token_ids", "Input should be a valid list of integers",
                              "list_type")
        out["stop_token_ids"] = list(stop_token_ids)
    for name, default in (("ignore_eos", False), ("include_stop_str_in_output", False),
                          ("skip_special_tokens", True)):
        value = fields.boolean(name, default)
        if value != default:
            out[name] = value
    return out


def _stop(fields: _Fields) -> List[str]:
    stop = fields.data.get("stop")
    if stop is None:
        return []
    if isinstance(stop, str):
        return [stop]
    if not isinstance(stop, list) or not all(isinstance(s, str) for s in stop):
        raise fields.fail("stop", "Input should be a valid string or a list of strings",
                          "string_type")
    if len(stop) > MAX_STOP_SEQUENCES:
        raise fields.fail("stop", f"List should have at most {MAX_STOP_SEQUENCES} items after "
                          f"validation, not {len(stop)}", "too_long")
    return [s for s in stop if s]


def sampling_kwargs(request: ParsedRequest, choice_index: int = 0) -> Dict[str, Any]:
    """SamplingParams keyword arguments of choice `choice_index`: with a seed, choice i samples
    with seed + i, so the n choices differ and each repeats."""
    out = dict(request.sampling)
    if "seed" in out:
        out["seed"] = out["seed"] + choice_index
    return out


def select_model(requested: Optional[str], model_ids: Sequence[str],
                 request_id: Optional[str] = None) -> str:
    """The model a request runs on: the only one when it names none (400 with several), its
    base model must be served (`base:adapter` names a LoRA adapter of `base`), else 404."""
    if requested is None:
        if len(model_ids) == 1:
            return model_ids[0]
        raise http_error(400, "Model parameter is required when multiple models are "
                         f"configured. Available models: {list(model_ids)}", request_id)
    base = requested.split(":", 1)[0]
    if base not in model_ids:
        raise http_error(404, f'Got request for model "{requested}". Could not find base model '
                         f'with ID "{base}".', request_id)
    return requested


# ---- responses -----------------------------------------------------------------------------

class Choice(NamedTuple):
    index: int
    text: str
    finish_reason: Optional[str]
    stop_reason: Union[None, str, int] = None


def new_request_id(kind: str) -> str:
    """chatcmpl-<uuid> for chat, cmpl-<uuid> for completions."""
    return ("chatcmpl-" if kind == CHAT else "cmpl-") + uuid.uuid4().hex


def usage(prompt_tokens: int, completion_tokens: int) -> Dict[str, int]:
    return {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens}


def chat_completion_response(request_id: str, model: str, created: int,
                             choices: Sequence[Choice], usage: Mapping[str, int]
                             ) -> Dict[str, Any]:
    return {"id": request_id, "object": "chat.completion", "created": created, "model": model,
            "choices": [{"index": c.index,
                         "message": {"role": "assistant", "content": c.text},
                         "logprobs": None, "finish_reason": c.finish_reason,
                         "stop_reason": c.stop_reason} for c in choices],
            "usage": dict(usage)}


def completion_response(request_id: str, model: str, created: int,
                        choices: Sequence[Choice], usage: Mapping[str, int]) -> Dict[str, Any]:
    return {"id": request_id, "object": "text_completion", "created": created, "model": model,
            "choices": [{"index": c.index, "text": c.text, "logprobs": None,
                         "finish_reason": c.finish_reason, "stop_reason": c.stop_reason}
                        for c in choices],
            "usage": dict(usage)}


def _chunk(kind: str, request_id: str, model: str, created: int, choice: Dict[str, Any],
           include_usage: bool, chunk_usage: Optional[Mapping[str, int]]) -> Dict[str, Any]:
    out = {"id": request_id, "object": "chat.completion.chunk" if kind == CHAT else
           "text_completion", "created": created, "model": model, "choices": [choice]}
    if include_usage:
        out["usage"] = dict(chunk_usage) if chunk_usage is not None else None
    return out


def chat_chunk(request_id: str, model: str, created: int, index: int, delta: Dict[str, Any],
               finish_reason: Optional[str] = None, stop_reason: Union[None, str, int] = None,
               include_usage: bool = False, chunk_usage: Optional[Mapping[str, int]] = None
               ) -> Dict[str, Any]:
    """One chat.completion.chunk: `delta` is {"role": "assistant", "content": ""} first, then
    {"content": piece}; finish_reason is null until the choice's last chunk. With
    include_usage every chunk has "usage" (null, or `chunk_usage` for continuous stats)."""
    choice = {"index": index, "delta": dict(delta), "logprobs": None,
              "finish_reason": finish_reason, "stop_reason": stop_reason}
    return _chunk(CHAT, request_id, model, created, choice, include_usage, chunk_usage)


def chat_role_chunk(request_id: str, model: str, created: int, index: int,
                    include_usage: bool = False) -> Dict[str, Any]:
    return chat_chunk(request_id, model, created, index, {"role": "assistant", "content": ""},
                      include_usage=include_usage)


def completion_chunk(request_id: str, model: str, created: int, index: int, text: str,
                     finish_reason: Optional[str] = None, stop_reason: Union[None, str, int] = None,
                     include_usage: bool = False, chunk_usage: Optional[Mapping[str, int]] = None
                     ) -> Dict[str, Any]:
    choice = {"index": index, "text": text, "logprobs": None, "finish_reason": finish_reason,
              "stop_reason": stop_reason}
    return _chunk(COMPLETION, request_id, model, created, choice, include_usage, chunk_usage)


def usage_chunk(kind: str, request_id: str, model: str, created: int,
                usage: Mapping[str, int]) -> Dict[str, Any]:
    """The include_usage chunk sent after every choice finished and before [DONE]."""
    return {"id": request_id, "object": "chat.completion.chunk" if kind == CHAT else
            "text_completion", "created": created, "model": model, "choices": [],
            "usage": dict(usage)}


def sse(payload: Mapping[str, Any]) -> bytes:
    """One server-sent event: `data: <json>\\n\\n`."""
    return b"data: " + json.dumps(payload, separators=(",", ":")).encode("utf-8") + b"\n\n"


def model_card(model_id: str, created: int, owned_by: str = "tessera") -> Dict[str, Any]:
    return {"id": model_id, "object": "model", "created": created, "owned_by": owned_by}


def model_list(model_ids: Sequence[str], created: int, owned_by: str = "tessera"
               ) -> Dict[str, Any]:
    """The body of GET /v1/models."""
    return {"object": "list", "data": [model_card(m, created, owned_by) for m in model_ids]}
