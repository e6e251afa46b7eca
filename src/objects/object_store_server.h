// ObjectStoreServer: hosts a node's ObjectStore on a Unix-domain socket, for the node agent to
// run. Workers and drivers on the node connect with ObjectStoreClient, receive the arena's memfd
// once (SCM_RIGHTS), and from then on exchange only small messages: the bytes of objects are
// written and read in place, never sent through the socket.
//
//   auto server = ObjectStoreServer::Start({.socket_path = dir + "/objects.sock",
//                                           .capacity_bytes = 2ull << 30});
//   ...
//   (*server)->Stop();
//
// A connection that closes (its process exited or died) has its pins released and the objects it
// left unsealed aborted. A malformed message gets a one-line error reply; a frame whose length
// cannot be trusted also closes that connection. Neither disturbs other clients.
//
// Threading: Start and Stop from one thread; one internal thread runs the socket loop; store()
// and arena() are safe to use from any thread (the agent may create and read objects directly,
// as client id kLocalStoreClient).
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>

#include "absl/status/statusor.h"
#include "objects/object_store.h"
#include "objects/shared_memory.h"

namespace tessera {

// The client id the hosting process uses for its own direct calls on store().
inline const StoreClientId kLocalStoreClient{0};

struct ObjectStoreServerOptions {
  std::string socket_path;
  uint64_t capacity_bytes = 0;
  ArenaCreateOptions arena;
  uint64_t max_metadata_bytes = 64 * 1024;
  // Where primary copies are spilled when the arena is full ("" never): made 0700 if missing,
  // refused unless it is a directory of this user, emptied of files an earlier store left.
  std::string spill_dir;
};

class ObjectStoreServer {
 public:
  // Creates the arena, binds the socket (a stale socket file nobody listens on is replaced; a
  // live one is AlreadyExists; the socket file is 0600 whatever the umask) and starts serving.
  // Only processes of the same user (or root) may connect: others are closed at once
  // (SO_PEERCRED), since every client maps the store's memory.
  static absl::StatusOr<std::unique_ptr<ObjectStoreServer>> Start(ObjectStoreServerOptions options);
  ~ObjectStoreServer();
  ObjectStoreServer(const ObjectStoreServer&) = delete;
  ObjectStoreServer& operator=(const ObjectStoreServer&) = delete;

  // Closes every connection (as if each client went away), stops the loop and removes the
  // socket file. Idempotent.
  void Stop();

  ObjectStore& store() { return *store_; }
  const SharedMemoryArena& arena() const { return *arena_; }
  const std::string& socket_path() const { return options_.socket_path; }
  // Connections accepted and not yet closed (for tests and status).
  int64_t connection_count() const { return connections_.load(); }
  // Connections closed at once because the peer is another user (SO_PEERCRED).
  int64_t refused_connection_count() const { return refused_.load(); }
  // Gets waiting for their object to be sealed (for tests and status).
  int64_t waiting_get_count() const { return waiting_gets_.load(); }

 private:
  class Loop;
  struct SealQueue;
  ObjectStoreServer(ObjectStoreServerOptions options, std::unique_ptr<SharedMemoryArena> arena,
                    std::unique_ptr<ObjectStore> store);

  ObjectStoreServerOptions options_;
  std::unique_ptr<SharedMemoryArena> arena_;
  std::unique_ptr<SealQueue> seals_;  // declared before store_: the store's callback uses it
  std::unique_ptr<ObjectStore> store_;
  std::unique_ptr<Loop> loop_;
  std::thread thread_;
  std::atomic<int64_t> connections_{0};
  std::atomic<int64_t> refused_{0};
  std::atomic<int64_t> waiting_gets_{0};
  bool stopped_ = false;
};

}  // namespace tessera
