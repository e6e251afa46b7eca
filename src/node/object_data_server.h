// ObjectDataServer: the holding agent's side of the raw TCP data path between node agents. The
// NodeAgent.OfferObject RPC (mutual TLS from the cluster token, like every call) pins a sealed
// object and registers a one-time random ticket and a fresh random transfer key for it
// (OfferObject below); the pulling agent then connects to this server's port, presents the
// ticket (object_data_protocol.h), and receives the object's bytes sealed under the key
// (object_data_cipher.h: AES-256-GCM chunks of 1 MiB, each with its tag), encrypted from the
// arena's mapping into the sending thread's buffer and written one chunk per send. So the port
// carries nothing readable, on loopback as between machines, and whoever is not this server
// cannot feed the puller bytes it accepts. A ticket is good for one connection; an unknown, used
// or expired one is refused (Unauthenticated). The pin ends when the bytes are sent, the
// connection fails, the puller drops the ticket, or the ticket expires unused. No handshake:
// the event loop only reads the fixed-size request.
//
// Bounded by construction, whatever peers do: connections are read by one event loop (epoll)
// until their request is whole, and only a request with a valid ticket to send takes one of
// `transfer_threads` sending threads (more wait their turn, queued). A refused request is answered
// (the protocol's reply header) and its connection closed at once; a connection that sends no
// whole request within `request_timeout` is answered DeadlineExceeded and closed; past
// `max_connections` open at once, a new one is answered Unavailable and closed. Refusals are
// written without blocking: a reply (a few dozen bytes) always fits a fresh socket's buffer.
//
// Threading: thread-safe. One event-loop thread (accepting, reading requests, refusing, dropping
// tickets, expiring offers) and `transfer_threads` sending threads (each with a buffer of one
// sealed chunk, about 1 MiB), all started by Start; Stop() closes the listener and every
// connection and joins them.
#pragma once

#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "node/object_data_protocol.h"
#include "node/object_data_socket.h"
#include "node/object_transfer.h"
#include "process/wakeable_epoll.h"

namespace tessera {

struct ObjectDataServerOptions {
  // An IP or host name; the port is always ephemeral.
  std::string bind_address = "127.0.0.1";
  // An offer not claimed by a connection within this long is dropped and its pin released.
  absl::Duration ticket_lifetime = absl::Seconds(60);
  // The most one connection may take, accept to last byte (time spent queued for a sending
  // thread included).
  absl::Duration transfer_timeout = absl::Minutes(10);
  // A connection must deliver its whole request within this long of being accepted; one that
  // does not is answered DeadlineExceeded and closed. A puller sends its request right after
  // connecting, so a few seconds is plenty even on a loaded machine.
  absl::Duration request_timeout = absl::Seconds(5);
  // Threads that send objects' bytes: this many transfers stream at once, the rest wait in
  // order. Sending is one kernel copy per buffer, so a few threads fill a NIC.
  int transfer_threads = 4;
  // Connections open at once, in any phase (reading the request, waiting for a sending thread,
  // sending). One more is answered Unavailable ("at its connection limit") and closed.
  int max_connections = 256;
};

struct ObjectOffer {
  std::string ticket;  // kDataTicketBytes random bytes
  std::string key;     // kTransferKeyBytes random bytes, sealing this offer's bytes only
  uint64_t size = 0;
  std::string metadata;
};

class ObjectDataServer {
 public:
  // InvalidArgument naming the option when `options` is out of range (a thread or connection
  // count below 1, a timeout that is not positive); Unavailable when the address cannot be bound.
  static absl::StatusOr<std::unique_ptr<ObjectDataServer>> Start(LocalObjectStore local,
                                                                 ObjectDataServerOptions options);
  ~ObjectDataServer();  // Stop()
  ObjectDataServer(const ObjectDataServer&) = delete;
  ObjectDataServer& operator=(const ObjectDataServer&) = delete;

  int port() const { return port_; }
  // Pins sealed object `id` and answers a ticket and a transfer key for it (both to be handed
  // only over an authenticated channel). NotFound when it is not sealed here.
  absl::StatusOr<ObjectOffer> OfferObject(const ObjectId& id);
  // Offers not yet claimed (for tests).
  size_t pending_offers() const ABSL_LOCKS_EXCLUDED(mu_);
  // Connections accepted and not yet closed, in any phase (for tests).
  int open_connections() const ABSL_LOCKS_EXCLUDED(mu_);
  // Stops accepting, ends every connection, releases every pin. Idempotent.
  void Stop() ABSL_LOCKS_EXCLUDED(mu_);

 private:
  struct Pending {
    ObjectId id;
    ObjectLocation location;
    std::string key;
    absl::Time expires;
  };
  // A connection whose request claimed an offer to send, waiting for or on a sending thread.
  struct Transfer {
    UniqueFd fd;  // blocking again: the sender's writes wait under SO_SNDTIMEO
    Pending offer;
    absl::Time deadline;
  };
  // A connection the event loop reads until its request is whole.
  struct Incoming {
    UniqueFd fd;  // non-blocking
    absl::Time accepted;
    size_t got = 0;
    char bytes[kDataRequestBytes];
  };

  ObjectDataServer(LocalObjectStore local, ObjectDataServerOptions options, UniqueFd listener,
                   int port, WakeableEpoll loop);
  // The event loop: accepts, reads requests, closes idle connections, expires offers.
  void EventLoop();
  // Accepts every waiting connection (or refuses it past max_connections). False when accepting
  // failed for lack of descriptors or memory: the caller stops watching the listener a moment.
  bool AcceptWaiting(absl::Time now) ABSL_LOCKS_EXCLUDED(mu_);
  // Reads what `serial`'s connection sent; a whole request is handled (HandleRequest).
  void ReadRequest(uint64_t serial) ABSL_LOCKS_EXCLUDED(mu_);
  // Refuses, drops the ticket, or queues the transfer the request asks for.
  void HandleRequest(Incoming incoming) ABSL_LOCKS_EXCLUDED(mu_);
  void SenderLoop() ABSL_LOCKS_EXCLUDED(mu_);
  // Writes the reply header and the sealed chunks, sealing each into `buffer` (one sealed
  // chunk's bytes).
  void Send(const Transfer& transfer, std::vector<uint8_t>& buffer);
  // Answers `code` and `message` without blocking, then CloseConnection.
  void Refuse(UniqueFd fd, absl::StatusCode code, std::string_view message)
      ABSL_LOCKS_EXCLUDED(mu_);
  // Closes gracefully (our side ended, unread input discarded so the close does not reset the
  // reply in flight) and counts the connection gone.
  void CloseConnection(UniqueFd fd) ABSL_LOCKS_EXCLUDED(mu_);
  // Sweeps expired offers; the time of the next expiry (InfiniteFuture when none).
  absl::Time ExpireLocked(absl::Time now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const LocalObjectStore local_;
  const ObjectDataServerOptions options_;
  UniqueFd listener_;  // non-blocking
  const int port_;
  WakeableEpoll loop_;  // woken by a new offer's expiry and by Stop
  std::thread event_thread_;
  std::vector<std::thread> sender_threads_;

  // Owned by the event loop thread: connections still sending their request, by serial, and
  // their request deadlines in accept order (all share request_timeout, so the front is next).
  absl::flat_hash_map<uint64_t, Incoming> incoming_;
  std::deque<std::pair<absl::Time, uint64_t>> request_deadlines_;
  uint64_t next_serial_ = 0;

  mutable absl::Mutex mu_;
  absl::CondVar transfer_queued_;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  absl::flat_hash_map<std::string, Pending> pending_ ABSL_GUARDED_BY(mu_);
  std::deque<Transfer> queued_ ABSL_GUARDED_BY(mu_);
  // The fds sending threads are writing to, so Stop can cut them (shutdown) to end the writes.
  absl::flat_hash_set<int> sending_fds_ ABSL_GUARDED_BY(mu_);
  int open_connections_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace tessera
