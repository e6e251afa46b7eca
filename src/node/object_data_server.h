// ObjectDataServer: the holding agent's side of the raw TCP data path between node agents. The
// NodeAgent.OfferObject RPC (token-checked like every call) pins a sealed object and registers a
// one-time random ticket for it (OfferObject below); the pulling agent then connects to this
// server's port, presents the ticket (object_data_protocol.h), and receives the object's bytes
// written straight from the arena's mapping: no copy in user space on this side. A ticket is
// good for one connection; an unknown, used or expired one is refused (Unauthenticated). The pin ends when the bytes are sent, the connection fails, the puller drops
// the ticket, or the ticket expires unused.
//
// Threading: thread-safe. One accept thread (which also expires tickets) and one thread per data
// connection; Stop() closes the listener and every connection and joins them.
#pragma once

#include <cstdint>
#include <list>
#include <memory>
#include <string>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "node/object_data_socket.h"
#include "node/object_transfer.h"

namespace tessera {

struct ObjectDataServerOptions {
  // An IP or host name; the port is always ephemeral.
  std::string bind_address = "127.0.0.1";
  // An offer not claimed by a connection within this long is dropped and its pin released.
  absl::Duration ticket_lifetime = absl::Seconds(60);
  // The most one connection may take, request to last byte.
  absl::Duration transfer_timeout = absl::Minutes(10);
};

struct ObjectOffer {
  std::string ticket;  // kDataTicketBytes random bytes
  uint64_t size = 0;
  std::string metadata;
};

class ObjectDataServer {
 public:
  // Unavailable when the address cannot be bound.
  static absl::StatusOr<std::unique_ptr<ObjectDataServer>> Start(LocalObjectStore local,
                                                                 ObjectDataServerOptions options);
  ~ObjectDataServer();  // Stop()
  ObjectDataServer(const ObjectDataServer&) = delete;
  ObjectDataServer& operator=(const ObjectDataServer&) = delete;

  int port() const { return port_; }
  // Pins sealed object `id` and answers a ticket for it. NotFound when it is not sealed here.
  absl::StatusOr<ObjectOffer> OfferObject(const ObjectId& id);
  // Offers not yet claimed (for tests).
  size_t pending_offers() const ABSL_LOCKS_EXCLUDED(mu_);
  // Stops accepting, ends every connection, releases every pin. Idempotent.
  void Stop() ABSL_LOCKS_EXCLUDED(mu_);

 private:
  struct Pending {
    ObjectId id;
    ObjectLocation location;
    absl::Time expires;
  };
  struct Connection {
    UniqueFd fd;
    std::thread thread;
    bool done = false;
  };

  ObjectDataServer(LocalObjectStore local, ObjectDataServerOptions options, UniqueFd listener,
                   int port, UniqueFd wake);
  void AcceptLoop();
  void Serve(Connection* connection);
  // Sweeps expired offers; the time of the next expiry (InfiniteFuture when none).
  absl::Time ExpireLocked(absl::Time now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void JoinFinishedLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const LocalObjectStore local_;
  const ObjectDataServerOptions options_;
  UniqueFd listener_;
  const int port_;
  UniqueFd wake_;  // eventfd: wakes the accept loop (a new offer's expiry, Stop)
  std::thread acceptor_;

  mutable absl::Mutex mu_;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  absl::flat_hash_map<std::string, Pending> pending_ ABSL_GUARDED_BY(mu_);
  std::list<Connection> connections_ ABSL_GUARDED_BY(mu_);
};

}  // namespace tessera
