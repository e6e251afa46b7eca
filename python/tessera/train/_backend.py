"""How a training framework joins the ranks of one attempt, shared by every Trainer.

  BackendConfig   the base of TorchConfig and JaxConfig (Ray's ray.train.backend.BackendConfig):
                  the driver pickles it into each rank's call; `backend_cls` names the
                  RankBackend the rank makes from it. The base itself is "no framework" (a
                  DataParallelTrainer without backend_config).
  RankBackend     runs inside each rank around the training function: on_start before it,
                  on_shutdown after it, and all_reduce_max/barrier for report(). The base joins
                  no framework: its all_reduce_max goes through _Rendezvous.
  _Rendezvous     the ranks of one attempt connected to rank 0 over TCP, on the MASTER_ADDR and
                  MASTER_PORT the gang chose for that attempt (a port only torch's own store
                  uses, so a torch backend syncs through its process group instead).

Threading: one training function per process; the rendezvous is used by that thread only.
Cost: one TCP connection per rank to rank 0; an all-reduce is one line each way.
"""

from __future__ import annotations

import os
import socket
import time
from dataclasses import dataclass
from typing import Any, Dict, Mapping, Optional, Tuple

# torch's default process-group timeout; also how long rank 0 waits for every rank to connect.
DEFAULT_PROCESS_GROUP_TIMEOUT_S = 1800.0
# How long a connection to rank 0 may take to say which rank it is.
_HELLO_TIMEOUT_S = 10.0
# Between tries to reach rank 0 before it listens.
_CONNECT_RETRY_S = 0.05


@dataclass
class BackendConfig:
    """No framework: the ranks sync report() through rank 0 (see the module's docstring)."""

    @property
    def backend_cls(self) -> type:
        return RankBackend


class RankBackend:
    """What one rank does around the training function (see the module's docstring)."""

    def __init__(self, config: BackendConfig, use_gpu: bool) -> None:
        self.config = config
        self.use_gpu = use_gpu
        self._rendezvous: Optional[_Rendezvous] = None

    def on_start(self) -> None:
        self._rendezvous = _Rendezvous(os.environ, DEFAULT_PROCESS_GROUP_TIMEOUT_S)

    def on_shutdown(self) -> None:
        if self._rendezvous is not None:
            self._rendezvous.close()
            self._rendezvous = None

    def all_reduce_max(self, value: int) -> int:
        """The largest `value` any rank passed (every rank calls it, as often as the others)."""
        if self._rendezvous is None:
            raise RuntimeError("the training backend is not started")
        return self._rendezvous.all_reduce_max(value)

    def barrier(self) -> None:
        self.all_reduce_max(0)


def _hello(env: Mapping[str, str], rank: int) -> bytes:
    # The job and attempt: a straggler of an earlier attempt on a reused port is turned away.
    return (f"tessera-train {env.get('TORCHELASTIC_RUN_ID', '')} "
            f"{env.get('TORCHELASTIC_RESTART_COUNT', '0')} {rank}\n").encode()


class _Rendezvous:
    """Every rank's connection to rank 0, which answers each all-reduce once all ranks asked."""

    def __init__(self, env: Mapping[str, str], timeout_s: float) -> None:
        self.rank = int(env["RANK"])
        self.world = int(env["WORLD_SIZE"])
        # Rank 0: every other rank's (socket, reader); the others: theirs to rank 0.
        self._peers: Dict[int, Tuple[socket.socket, Any]] = {}
        self._conn: Optional[Tuple[socket.socket, Any]] = None
        if self.world == 1:
            return
        host, port = env["MASTER_ADDR"], int(env["MASTER_PORT"])
        try:
            if self.rank == 0:
                self._serve(env, port, timeout_s)
            else:
                self._connect(env, host, port, timeout_s)
        except BaseException:
            self.close()
            raise

    def _serve(self, env: Mapping[str, str], port: int, timeout_s: float) -> None:
        if socket.has_dualstack_ipv6():
            server = socket.create_server(("", port), family=socket.AF_INET6,
                                          dualstack_ipv6=True, backlog=self.world)
        else:
            server = socket.create_server(("", port), backlog=self.world)
        deadline = time.monotonic() + timeout_s
        expected = {_hello(env, r): r for r in range(1, self.world)}
        with server:
            while len(self._peers) < self.world - 1:
                server.settimeout(max(0.001, deadline - time.monotonic()))
                try:
                    conn, _ = server.accept()
                except socket.timeout:
                    missing = sorted(set(range(1, self.world)) - set(self._peers))
                    raise TimeoutError(f"ranks {missing} did not reach rank 0 on port {port} "
                                       f"within {timeout_s:g} s") from None
                reader = conn.makefile("rb")
                try:
                    conn.settimeout(_HELLO_TIMEOUT_S)
                    rank = expected.get(reader.readline())
                    conn.settimeout(None)
                except OSError:
                    rank = None
                if rank is None or rank in self._peers:
                    reader.close()
                    conn.close()
                    continue
                conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                self._peers[rank] = (conn, reader)

    def _connect(self, env: Mapping[str, str], host: str, port: int, timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                conn = socket.create_connection(
                    (host, port), timeout=max(0.001, deadline - time.monotonic()))
                break
            except OSError as e:  # refused until rank 0 listens
                if time.monotonic() >= deadline:
                    raise TimeoutError(f"rank {self.rank} could not reach rank 0 at "
                                       f"{host}:{port} within {timeout_s:g} s: {e}") from None
                time.sleep(_CONNECT_RETRY_S)
        conn.settimeout(None)
        conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self._conn = (conn, conn.makefile("rb"))
        conn.sendall(_hello(env, self.rank))

    def all_reduce_max(self, value: int) -> int:
        if self.world == 1:
            return value
        if self.rank != 0:
            conn, reader = self._conn
            try:
                conn.sendall(b"%d\n" % value)
                line = reader.readline()
            except OSError as e:
                raise RuntimeError(f"rank 0 left the training group: {e}") from None
            if not line:
                raise RuntimeError("rank 0 left the training group (its connection closed) "
                                   "while this rank waited in report()")
            return int(line)
        result = value
        for rank in sorted(self._peers):
            conn, reader = self._peers[rank]
            try:
                line = reader.readline()
            except OSError as e:
                raise RuntimeError(f"rank {rank} left the training group: {e}") from None
            if not line:
                raise RuntimeError(f"rank {rank} left the training group (its connection "
                                   "closed) while rank 0 waited in report()")
            result = max(result, int(line))
        for rank in sorted(self._peers):
            try:
                self._peers[rank][0].sendall(b"%d\n" % result)
            except OSError as e:
                raise RuntimeError(f"rank {rank} left the training group: {e}") from None
        return result

    def close(self) -> None:
        pairs = list(self._peers.values()) + ([self._conn] if self._conn else [])
        for conn, reader in pairs:
            reader.close()
            conn.close()
        self._peers.clear()
        self._conn = None
