"""The replica's half of the proxy's HTTP frames, and the ASGI pieces a replica needs.

A request frame is `[u32 big-endian length of HEAD][HEAD: UTF-8 JSON][BODY]`, HEAD holding
method, path (percent-decoded), raw_path, query_string, headers ([[lowercase name, value]]),
http_version, route_prefix, request_id, client ([host, port]) and multiplexed_model_id. The
replica answers with a stream of bytes items: the first is
`[u32 BE length of RESPONSE HEAD][{"status", "headers", "more"} JSON][first body bytes]`, each
later one raw body bytes; `more` false means the first item holds the whole body.

`build_scope` makes the ASGI scope the app sees. For a route prefix other than "/" the scope's
root_path is the prefix (so FastAPI routes are mounted under it); Starlette before 0.33 routes
on `path` alone, so there the prefix is also cut from `path` and `raw_path` (Starlette 0.33 and
later cut root_path from path themselves).

`Exchange` is one request's ASGI receive/send pair: receive gives the body, then waits for the
client to go; send hands each message to the reader one at a time (a streaming app waits for
its reader). `to_asgi_messages` is Ray's conversion of a plain deployment's return value:
None/bytes as text/plain, str as text/plain; charset=utf-8, anything else as compact JSON.

Threading: one event loop. Cost: one JSON decode of the head; a dict per message.
"""

from __future__ import annotations

import asyncio
import json
from collections import deque
from typing import Any, Dict, List, Optional, Tuple

REJECTED_HEADER = "x-tessera-serve-rejected"
_LENGTH_BYTES = 4


def decode_frame(frame: bytes) -> Tuple[Dict[str, Any], bytes]:
    """(HEAD, BODY) of a request frame; ValueError for a malformed one."""
    frame = bytes(frame)
    if len(frame) < _LENGTH_BYTES:
        raise ValueError(f"An HTTP frame needs at least {_LENGTH_BYTES} bytes, got {len(frame)}")
    length = int.from_bytes(frame[:_LENGTH_BYTES], "big")
    end = _LENGTH_BYTES + length
    if end > len(frame):
        raise ValueError(f"An HTTP frame's head is {length} bytes, but only {len(frame) - 4} "
                         "follow its length")
    head = json.loads(frame[_LENGTH_BYTES:end].decode("utf-8"))
    if not isinstance(head, dict) or "method" not in head or "path" not in head:
        raise ValueError("An HTTP frame's head must be a JSON object with method and path")
    return head, frame[end:]


def encode_frame(head: Dict[str, Any], body: bytes = b"") -> bytes:
    """A frame: `[u32 BE head length][head JSON][body]` (requests and response firsts alike)."""
    encoded = json.dumps(head, separators=(",", ":")).encode("utf-8")
    return len(encoded).to_bytes(_LENGTH_BYTES, "big") + encoded + bytes(body)


def response_first(status: int, headers: List[List[str]], more: bool, body: bytes,
                   rest: str = "") -> bytes:
    """A response's first item; `rest`, with `more`, names where its other items wait (the
    replica's handle_http_rest)."""
    head: Dict[str, Any] = {"status": status, "headers": headers, "more": more}
    if rest:
        head["rest"] = rest
    return encode_frame(head, body)


def rejection() -> bytes:
    """The first (and only) item of a request the replica has no room for."""
    return response_first(503, [[REJECTED_HEADER, "1"]], False, b"")


def header(head: Dict[str, Any], name: str) -> str:
    """The value of request header `name` (lowercase) in HEAD, "" when absent."""
    for key, value in head.get("headers") or ():
        if key.lower() == name:
            return value
    return ""


def _latin1(text: str) -> bytes:
    try:
        return text.encode("latin-1")
    except UnicodeEncodeError:
        return text.encode("utf-8")


_starlette_keeps_path: Optional[bool] = None


def _starlette_strips_root_path() -> bool:
    """Whether Starlette routes on `path` minus `root_path` itself (0.33 and later)."""
    global _starlette_keeps_path
    if _starlette_keeps_path is None:
        try:
            import starlette

            major, minor = (int(part) for part in starlette.__version__.split(".")[:2])
            _starlette_keeps_path = (major, minor) >= (0, 33)
        except (ImportError, ValueError):
            _starlette_keeps_path = True
    return _starlette_keeps_path


def build_scope(head: Dict[str, Any], state: Optional[dict] = None) -> Dict[str, Any]:
    """The ASGI http scope of a request HEAD (see the module doc for the route prefix)."""
    prefix = head.get("route_prefix") or "/"
    root_path = "" if prefix == "/" else prefix
    path = head["path"]
    raw_path = head.get("raw_path") or path
    if root_path and not _starlette_strips_root_path():
        path = _strip(path, root_path)
        raw_path = _strip(raw_path, root_path)
    client = head.get("client")
    return {
        "type": "http",
        "asgi": {"version": "3.0", "spec_version": "2.3"},
        "http_version": head.get("http_version") or "1.1",
        "method": head["method"].upper(),
        "scheme": "http",
        "path": path,
        "raw_path": _latin1(raw_path),
        "query_string": _latin1(head.get("query_string") or ""),
        "root_path": root_path,
        "headers": [(_latin1(k.lower()), _latin1(v)) for k, v in head.get("headers") or ()],
        "client": (client[0], int(client[1])) if client else None,
        "server": None,
        "state": dict(state or {}),
    }


def _strip(path: str, prefix: str) -> str:
    if path == prefix or path.startswith(prefix + "/"):
        return path[len(prefix):] or "/"
    return path


def _json_default_encoders() -> Dict[type, Any]:
    encoders: Dict[type, Any] = {Exception: str}
    try:
        import numpy as np
    except ImportError:
        return encoders
    encoders[np.ndarray] = lambda array: array.tolist()
    encoders[np.generic] = lambda scalar: scalar.item()
    return encoders


def _to_json(obj: Any) -> bytes:
    try:
        from fastapi.encoders import jsonable_encoder
    except ImportError:
        encoders = _json_default_encoders()

        def default(value: Any) -> Any:
            for kind, encode in encoders.items():
                if isinstance(value, kind):
                    return encode(value)
            raise TypeError(f"Object of type {type(value).__name__} is not JSON serializable")

        return json.dumps(obj, separators=(",", ":"), default=default).encode()
    plain = jsonable_encoder(obj, custom_encoder=_json_default_encoders())
    return json.dumps(plain, separators=(",", ":")).encode()


def to_asgi_messages(obj: Any, status_code: int = 200) -> List[Dict[str, Any]]:
    """Ray's HTTP response for a plain deployment's return value (see the module doc)."""
    if obj is None:
        body, content_type = b"", b"text/plain"
    elif isinstance(obj, bytes):
        body, content_type = obj, b"text/plain"
    elif isinstance(obj, str):
        body, content_type = obj.encode("utf-8"), b"text/plain; charset=utf-8"
    else:
        body, content_type = _to_json(obj), b"application/json"
    return [
        {"type": "http.response.start", "status": status_code,
         "headers": [(b"content-type", content_type)]},
        {"type": "http.response.body", "body": body},
    ]


INTERNAL_ERROR_MESSAGES = to_asgi_messages("Internal Server Error", 500)


class Exchange:
    """One request's ASGI receive and send, and the reader's side of what the app sends."""

    def __init__(self, body: bytes) -> None:
        self._body: Optional[bytes] = body
        self._disconnected = asyncio.Event()
        self._messages: deque = deque()
        self._changed = asyncio.Event()  # a message arrived, one was taken, or the app ended
        self.ended = False
        self.failed = False  # the app raised (or returned without a response)
        self.cancelled = False  # the app was cancelled

    async def receive(self) -> Dict[str, Any]:
        if self._body is not None:
            body, self._body = self._body, None
            return {"type": "http.request", "body": body, "more_body": False}
        await self._disconnected.wait()
        return {"type": "http.disconnect"}

    async def send(self, message: Dict[str, Any]) -> None:
        if self._disconnected.is_set():
            return  # the reader is gone, as a server drops what is sent after a disconnect
        self._messages.append(message)
        self._changed.set()
        # A body part with more to come waits until the reader took what was sent (a slow
        # client holds a streaming app back); the head and the last part do not wait, so a
        # whole response goes to the reader in one turn of the loop.
        if message.get("type") != "http.response.body" or not message.get("more_body", False):
            return
        while self._messages and not self._disconnected.is_set():
            self._changed.clear()
            await self._changed.wait()

    def end(self) -> None:
        """The app returned (or failed): nothing more will be sent."""
        self.ended = True
        self._changed.set()

    def disconnect(self) -> None:
        """The reader is gone: receive() reports a disconnect, send() drops its messages."""
        self._disconnected.set()
        self._changed.set()

    async def next_message(self) -> Optional[Dict[str, Any]]:
        """The next message the app sent; None once it ended without more."""
        while not self._messages:
            if self.ended:
                return None
            self._changed.clear()
            await self._changed.wait()
        message = self._messages.popleft()
        self._changed.set()
        return message


def response_headers(message: Dict[str, Any], request_id: str) -> List[List[str]]:
    """An http.response.start's headers as [[name, value]] strings, with X-Request-ID added
    unless the app set it."""
    headers = [[bytes(k).decode("latin-1"), bytes(v).decode("latin-1")]
               for k, v in message.get("headers") or ()]
    if request_id and not any(k.lower() == "x-request-id" for k, _ in headers):
        headers.append(["x-request-id", request_id])
    return headers
