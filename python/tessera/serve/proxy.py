"""ProxyActor: the actor that holds one node's HTTP proxy (docs/serve.md, "Proxies").

The serve controller (in the head's process) makes one per node that has a replica when Serve
runs with proxy_location EveryNode, named SERVE_PROXY_ACTOR-<node id> in the namespace "serve",
pinned to its node, holding no resources, detached (it outlives a head restart; the next
controller finds it by name). Its constructor starts the C++ proxy (tessera._core.ServeProxyHost:
the same HTTP server, routers and replica calls as the head's proxy, run by this process's C++
threads; this Python object only holds it and answers the controller):

  ProxyActor(options_json)  options_json: {"node_id", "node_host", "http_host", "http_port",
                            "request_timeout_s", "keep_alive_timeout_s"}; a port that cannot be
                            bound fails the constructor (the controller shows why)
  ready()                   its address, "host:port" (the node's host when it binds every
                            interface); it also ends a drain (a new controller wants it serving)
  check_health()            raises when the proxy stopped
  start_draining()          /-/healthz answers 503 from now on; requests are still served
  stop_draining()           /-/healthz answers again
  is_drained()              whether no request is in flight (the controller ends it then)

Threading: one call at a time (the actor's default); the proxy's own threads never touch Python.
"""

from __future__ import annotations

import json
import logging
from typing import Any, Dict

from tessera.serve._constants import SERVE_LOGGER_NAME

logger = logging.getLogger(SERVE_LOGGER_NAME)

_EVERY_INTERFACE = ("", "0.0.0.0", "::")


def _address(http_host: str, node_host: str, port: int) -> str:
    """Where clients reach a proxy bound to http_host:port on a node reached at node_host."""
    host = http_host
    if host in _EVERY_INTERFACE:
        host = node_host or "127.0.0.1"
    if ":" in host:
        host = f"[{host}]"
    return f"{host}:{port}"


class ProxyActor:
    """One node's HTTP proxy (see the module doc)."""

    def __init__(self, options_json: str) -> None:
        from tessera import _core

        options: Dict[str, Any] = json.loads(options_json)
        self._node_id = str(options["node_id"])
        http_host = str(options.get("http_host", "127.0.0.1"))
        node_host = str(options.get("node_host", ""))
        self._proxy = _core.serve_proxy_start(
            self._node_id, node_host, http_host, int(options.get("http_port", 0)),
            float(options.get("request_timeout_s") or 0.0),
            float(options.get("keep_alive_timeout_s") or 0.0))
        self._address = _address(http_host, node_host, self._proxy.port())
        self._stopped = False
        logger.info("serve: the proxy of node %s listens on %s", self._node_id, self._address)

    def ready(self) -> str:
        self._proxy.set_draining(False)
        return self._address

    def check_health(self) -> None:
        if self._stopped:
            raise RuntimeError(f"the proxy of node {self._node_id} is stopped")

    def start_draining(self) -> None:
        self._proxy.set_draining(True)

    def stop_draining(self) -> None:
        self._proxy.set_draining(False)

    def is_drained(self) -> bool:
        return self._proxy.ongoing_requests() == 0

    def shutdown(self) -> None:
        """Stops serving (requests in flight are cancelled); for tests and a graceful end."""
        self._stopped = True
        self._proxy.stop()
