"""HTTP edge cases through the head's C++ proxy on a local cluster (two_nodes.yaml), with raw
sockets and http.client: each gets a clear status, loses nothing, and leaves the proxy answering
(a follow-up request on a new connection).

- keep-alive: several requests on one connection, and pipelined ones (a Content-Length body, a
  chunked body, /-/healthz, /-/routes and a 404 between them) answered in order;
- a 16 MiB body, hashed and echoed back by the deployment;
- a slow client that sends its request a few bytes at a time, and one that reads nothing of a
  24 MiB streamed response until the replica has produced all of it (the proxy holds the rest
  back meanwhile and answers others);
- a client that disconnects mid-stream: the replica's generator is stopped (it writes a file);
- malformed request line (400), too many headers and too large a head (431), a body over the
  proxy's 100 MiB limit (413), request_timeout_s (408 with Ray's text, and the request cancelled
  at the replica), max_queued_requests exceeded (503 with Ray's BackPressureError text).

One cluster, one Serve (request_timeout_s is a start option: REQUEST_TIMEOUT_S for the module)
and two applications: "edge" (/edge) and "narrow" (/narrow, one request at a time, one queued).
Replicas report what they did by writing files in a folder of the module's. Waits poll; the
only pauses are the slow client's own.
"""
import asyncio
import hashlib
import http.client
import json
import os
import socket
import time
import urllib.parse
from concurrent.futures import ThreadPoolExecutor

import pytest

from conftest import start_serve, wait_for

serve = pytest.importorskip("tessera.serve")
pytest.importorskip("starlette")

# Every request of the module must end within it: the 408 test waits it out once.
REQUEST_TIMEOUT_S = 10
REPLICA = {"num_cpus": 0.1}
SOCKET_TIMEOUT_S = 60
MAX_BODY_BYTES = 100 * 1024 * 1024  # the proxy's limit (HttpProxyServerOptions)
PATTERN = bytes(range(256)) * 1024  # what /bytes streams, 256 KiB at a time


def make_edge(folder):
    """The deployment of both applications, by path (the last segment):

    /echo    the body back, with its sha256 (x-sha256) and what was asked (x-asked: method, path
             and query);
    /stream  b"<i>\\n" every 50 ms until stopped; then writes <tag>.stopped (the exception that
             stopped it);
    /bytes   `size` bytes of PATTERN, streamed; then writes <tag>.produced;
    /hold    writes <tag>.started, answers "released" once the file <tag> exists; writes
             <tag>.cancelled when cancelled.
    """
    from starlette.responses import Response, StreamingResponse

    def mark(name, text=""):
        with open(os.path.join(folder, name), "w") as f:
            f.write(text)

    async def forever(tag):
        try:
            i = 0
            while True:
                yield f"{i}\n".encode()
                i += 1
                await asyncio.sleep(0.05)
        except BaseException as e:  # CancelledError, or GeneratorExit when closed
            mark(f"{tag}.stopped", type(e).__name__)
            raise

    async def produce(size, tag):
        sent = 0
        while sent < size:
            piece = PATTERN[:size - sent]
            yield piece
            sent += len(piece)
        mark(f"{tag}.produced")

    async def hold(tag):
        mark(f"{tag}.started")
        try:
            while not os.path.exists(os.path.join(folder, tag)):
                await asyncio.sleep(0.05)
        except asyncio.CancelledError:
            mark(f"{tag}.cancelled")
            raise
        return Response("released")

    @serve.deployment(ray_actor_options=REPLICA, max_ongoing_requests=100)
    class Edge:
        async def __call__(self, request):
            kind = request.url.path.rsplit("/", 1)[-1]
            query = request.query_params
            if kind == "echo":
                body = await request.body()
                return Response(body, media_type="application/octet-stream", headers={
                    "x-sha256": hashlib.sha256(body).hexdigest(),
                    "x-asked": f"{request.method} {request.url.path}?{request.url.query}"})
            if kind == "stream":
                return StreamingResponse(forever(query["tag"]), media_type="text/plain")
            if kind == "bytes":
                return StreamingResponse(produce(int(query["size"]), query["tag"]),
                                         media_type="application/octet-stream")
            if kind == "hold":
                return await hold(query["tag"])
            return Response(f"no {kind}", status_code=400)

    return Edge


@pytest.fixture(scope="module")
def proxy(cluster, tmp_path_factory):
    """(host, port) of the proxy, with both applications running; and their files' folder."""
    folder = tmp_path_factory.mktemp("edge")
    base = start_serve(request_timeout_s=REQUEST_TIMEOUT_S)
    edge = make_edge(str(folder))
    serve.run(edge.bind(), name="edge", route_prefix="/edge")
    serve.run(edge.options(name="Narrow", max_ongoing_requests=1, max_queued_requests=1).bind(),
              name="narrow", route_prefix="/narrow")
    address = urllib.parse.urlsplit(base)
    yield (address.hostname, address.port), folder
    serve.shutdown()


# ---------------------------------------------------------------------------------------------
# The client side: raw requests and responses.


def connect(address, *options):
    """A connection to the proxy; `options` are (level, name, value) for setsockopt, set before
    connecting (a receive buffer's size must be)."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    for option in options:
        sock.setsockopt(*option)
    sock.settimeout(SOCKET_TIMEOUT_S)
    sock.connect(address)
    return sock


def request(method, path, body=b"", headers=()):
    """A request's bytes: a Content-Length body unless the headers say chunked."""
    lines = [f"{method} {path} HTTP/1.1", "Host: tessera-test"]
    lines += [f"{name}: {value}" for name, value in headers]
    if body and not any(name.lower() == "transfer-encoding" for name, _ in headers):
        lines.append(f"Content-Length: {len(body)}")
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + body


def chunked(pieces):
    return b"".join(b"%x\r\n%s\r\n" % (len(p), p) for p in pieces) + b"0\r\n\r\n"


def read_head(reader):
    """(status, headers with lower-case names) of the response `reader` is at."""
    line = reader.readline()
    if not line:
        raise ConnectionError("the proxy closed the connection instead of answering")
    version, status, _ = line.decode("latin-1").split(" ", 2)
    assert version == "HTTP/1.1", line
    headers = {}
    while (line := reader.readline()) not in (b"\r\n", b""):
        name, value = line.decode("latin-1").split(":", 1)
        headers[name.strip().lower()] = value.strip()
    return int(status), headers


def read_body(reader, headers):
    if headers.get("transfer-encoding") == "chunked":
        pieces = []
        while size := int(reader.readline().split(b";")[0], 16):
            pieces.append(reader.read(size))
            assert reader.readline() == b"\r\n"
        while reader.readline() not in (b"\r\n", b""):
            pass  # trailers
        return b"".join(pieces)
    body = reader.read(int(headers.get("content-length", 0)))
    assert len(body) == int(headers.get("content-length", 0)), "a cut response"
    return body


def read_response(reader):
    status, headers = read_head(reader)
    return status, headers, read_body(reader, headers)


def exchange(address, data, closes=False):
    """Sends `data` on a new connection and reads the one response; with `closes`, the proxy
    must then close the connection."""
    with connect(address) as sock, sock.makefile("rb") as reader:
        sock.sendall(data)
        response = read_response(reader)
        if closes:
            assert reader.read() == b"", "the connection stayed open"
        return response


def assert_answers(address, what="after"):
    """The proxy answers a new request (the follow-up of every edge case)."""
    conn = http.client.HTTPConnection(*address, timeout=SOCKET_TIMEOUT_S)
    try:
        conn.request("POST", f"/edge/echo?{what}", body=b"still here")
        response = conn.getresponse()
        assert (response.status, response.read()) == (200, b"still here")
    finally:
        conn.close()


# ---------------------------------------------------------------------------------------------
# Keep-alive and large bodies.


def test_requests_share_a_keep_alive_connection(proxy):
    address, _ = proxy
    conn = http.client.HTTPConnection(*address, timeout=SOCKET_TIMEOUT_S)
    try:
        ports = set()
        for i in range(4):
            conn.request("POST", f"/edge/echo?i={i}", body=f"body {i}".encode())
            response = conn.getresponse()
            assert (response.status, response.read()) == (200, f"body {i}".encode())
            assert response.getheader("x-asked") == f"POST /edge/echo?i={i}"
            ports.add(conn.sock.getsockname()[1])
        assert len(ports) == 1  # never reconnected
    finally:
        conn.close()


def test_pipelined_requests_are_answered_in_order(proxy):
    address, _ = proxy
    requests = [
        request("GET", "/edge/echo?n=1"),
        request("POST", "/edge/echo?n=2", b"fixed length"),
        request("POST", "/edge/echo?n=3", chunked([b"chunked ", b"in ", b"three"]),
                [("Transfer-Encoding", "chunked")]),
        request("GET", "/-/healthz"),
        request("GET", "/nowhere/at/all"),
        request("GET", "/-/routes"),
        request("POST", "/edge/echo?n=7", b"last", [("Connection", "close")]),
    ]
    with connect(address) as sock, sock.makefile("rb") as reader:
        sock.sendall(b"".join(requests))  # all at once, before any answer
        responses = [read_response(reader) for _ in requests]
        assert reader.read() == b""  # closed after the one that asked for it
    asked = [(status, headers.get("x-asked"), body) for status, headers, body in responses]
    assert asked[:3] == [(200, "GET /edge/echo?n=1", b""),
                         (200, "POST /edge/echo?n=2", b"fixed length"),
                         (200, "POST /edge/echo?n=3", b"chunked in three")]
    assert responses[3][0::2] == (200, b"success")
    assert responses[4][0] == 404
    assert responses[4][2] == (b"Path '/nowhere/at/all' not found. Ping http://.../-/routes for "
                               b"available routes.")
    assert responses[5][0] == 200
    assert json.loads(responses[5][2]) == {"/edge": "edge", "/narrow": "narrow"}
    assert asked[6] == (200, "POST /edge/echo?n=7", b"last")


def test_a_16_mib_body_is_hashed_and_echoed_whole(proxy):
    address, _ = proxy
    body = os.urandom(16 * 1024 * 1024)
    conn = http.client.HTTPConnection(*address, timeout=SOCKET_TIMEOUT_S)
    try:
        conn.request("PUT", "/edge/echo?big", body=body)
        response = conn.getresponse()
        echoed = response.read()
        assert response.status == 200
        assert response.getheader("x-sha256") == hashlib.sha256(body).hexdigest()
        assert len(echoed) == len(body) and echoed == body
    finally:
        conn.close()
    assert_answers(address)


# ---------------------------------------------------------------------------------------------
# Slow clients and clients that leave.


def test_a_client_sending_a_few_bytes_at_a_time_is_answered(proxy):
    address, _ = proxy
    body = bytes(range(256)) * 2
    data = request("POST", "/edge/echo?slow", chunked([body[:200], body[200:]]),
                   [("Transfer-Encoding", "chunked"), ("X-Padding", "p" * 100)])
    with connect(address, (socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)) as sock, \
            sock.makefile("rb") as reader:
        for start in range(0, len(data), 7):
            sock.sendall(data[start:start + 7])
            time.sleep(0.005)  # the slow client itself: each piece its own segment
        status, headers, echoed = read_response(reader)
    assert (status, echoed) == (200, body)
    assert headers["x-sha256"] == hashlib.sha256(body).hexdigest()
    assert_answers(address)


def test_a_client_reading_slowly_gets_every_byte_while_others_are_answered(proxy):
    # The client takes nothing until the replica has produced the whole response: far more than
    # the proxy buffers for one connection (8 MiB) and the sockets hold, so the proxy holds the
    # rest back; meanwhile it answers other clients.
    address, folder = proxy
    size = 24 * 1024 * 1024
    small_window = (socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    with connect(address, small_window) as sock, sock.makefile("rb") as reader:
        sock.sendall(request("GET", f"/edge/bytes?size={size}&tag=slow"))
        wait_for(lambda: (folder / "slow.produced").exists(), 60,
                 "the replica to produce the whole response")
        assert_answers(address, "while-a-client-reads-slowly")
        status, headers, body = read_response(reader)
    expected = (PATTERN * (size // len(PATTERN) + 1))[:size]
    assert status == 200 and len(body) == size
    assert hashlib.sha256(body).digest() == hashlib.sha256(expected).digest()
    assert_answers(address)


def test_a_client_leaving_mid_stream_stops_the_replicas_generator(proxy):
    address, folder = proxy
    with connect(address) as sock, sock.makefile("rb") as reader:
        sock.sendall(request("GET", "/edge/stream?tag=left"))
        status, headers = read_head(reader)
        assert status == 200 and headers["transfer-encoding"] == "chunked"
        size = int(reader.readline(), 16)
        assert reader.read(size).startswith(b"0\n")  # the stream is under way
    # Gone: the replica's generator gets CancelledError at its next await (or is closed).
    wait_for(lambda: (folder / "left.stopped").exists(), 60, "the replica's generator to stop")
    assert (folder / "left.stopped").read_text() in ("CancelledError", "GeneratorExit")
    assert_answers(address)


# ---------------------------------------------------------------------------------------------
# Requests the proxy refuses, and limits.


@pytest.mark.parametrize("data, status, reason", [
    (b"GARBAGE\r\n\r\n", 400, b'the request line is not "METHOD TARGET HTTP/1.x"'),
    (request("GET", "/edge/echo", headers=[(f"X-H{i}", "v") for i in range(101)]), 431,
     b"the request has more than 100 headers"),
    (request("GET", "/edge/echo", headers=[("X-Big", "b" * 20000)]), 431,
     b"the request line and headers exceed 16384 bytes"),
    (request("POST", "/edge/echo", headers=[("Content-Length", str(MAX_BODY_BYTES + 1))]), 413,
     b"the request body of 104857601 bytes exceeds the limit of 104857600 bytes"),
], ids=["malformed-request-line", "header-count", "header-bytes", "body-over-limit"])
def test_a_refused_request_gets_its_status_and_the_connection_closes(proxy, data, status,
                                                                      reason):
    address, _ = proxy
    # Where the next request would start is unknown: the connection closes.
    answered, _, body = exchange(address, data, closes=True)
    assert (answered, body) == (status, reason)
    assert_answers(address)


def test_request_timeout_answers_408_with_rays_text_and_cancels_the_request(proxy):
    address, folder = proxy
    started = time.monotonic()
    status, _, body = exchange(
        address, request("GET", "/edge/hold?tag=late", headers=[("X-Request-ID", "late-1")]))
    assert time.monotonic() - started >= REQUEST_TIMEOUT_S * 0.9
    # Ray's text interpolates request_timeout_s, a float: "10.0s".
    assert (status, body) == (
        408, f"Request late-1 timed out after {float(REQUEST_TIMEOUT_S)}s.".encode())
    wait_for(lambda: (folder / "late.cancelled").exists(), 60, "the request cancelled")
    assert_answers(address)


def test_past_max_queued_requests_the_proxy_answers_503(proxy):
    # Narrow runs one request at a time and queues one at the proxy; more are refused.
    address, folder = proxy
    gate = "/narrow/hold?tag=gate"
    with ThreadPoolExecutor(4) as pool:
        first = pool.submit(exchange, address, request("GET", gate))
        wait_for(lambda: (folder / "gate.started").exists(), 60, "the first request to run")
        others = [pool.submit(exchange, address, request("GET", gate)) for _ in range(3)]
        refused = wait_for(lambda: [f for f in others if f.done()] if sum(
            f.done() for f in others) >= 2 else None, 60, "two requests refused")
        for future in refused:
            status, _, body = future.result()
            assert status == 503
            assert body == (b"Request dropped due to backpressure (num_queued_requests=1, "
                            b"max_queued_requests=1).")
        (folder / "gate").touch()
        queued = [f for f in others if f not in refused]
        assert [f.result()[0::2] for f in [first, *queued]] == [(200, b"released")] * 2
    assert_answers(address)
