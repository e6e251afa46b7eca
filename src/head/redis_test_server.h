// RedisTestServer: a real redis-server for tests, private to the test and gone after it.
//
//   auto redis = testing::RedisTestServer::Create();
//   if (!redis.ok()) GTEST_SKIP() << redis.status().message();  // redis-server not installed
//   options.address = (*redis)->address();                        // "unix:/tmp/.../redis.sock"
//
// The server listens only on a unix socket (mode 0700) in a temporary folder of its own (no TCP
// port, so parallel tests never collide), keeps nothing on disk (no RDB snapshots, no AOF), and
// takes every setting, the password included, from a config file in that folder: nothing secret
// is on its command line. Create and Start return once it answers a PING. Stop sends SIGTERM,
// then SIGKILL when it has not exited within a few seconds; the destructor stops it and removes
// the folder, so no server outlives its test. Where util-linux's setpriv is installed (always on
// Debian), the server also gets SIGKILL from the kernel when the thread that started it ends,
// so a test process that crashes leaves no server running either: start it from a thread that
// outlives it (the test's own). Start after Stop brings a fresh, empty server up on
// the same socket (what a Redis restart looks like to a client), or, with `persistent`, the
// same data back.
//
// Thread-compatible: one thread drives it.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "process/child_process.h"

namespace tessera::testing {

// The redis-server to run: $TESSERA_REDIS_SERVER when set, else redis-server on $PATH, else
// /usr/bin/redis-server or /usr/sbin/redis-server. NotFound, saying how to install it, when there
// is none (tests skip on it).
absl::StatusOr<std::string> FindRedisServer();

struct RedisTestServerOptions {
  // "": no password. Else the server requires it (requirepass in the config file).
  std::string password;
  // Keep the data across Stop and Start (an append-only file in dir(), fsynced on every write),
  // as a production Redis configured with `appendonly yes` does; otherwise Start after Stop
  // brings up an empty server.
  bool persistent = false;
};

class RedisTestServer {
 public:
  static absl::StatusOr<std::unique_ptr<RedisTestServer>> Create(
      RedisTestServerOptions options = {});
  RedisTestServer(const RedisTestServer&) = delete;
  RedisTestServer& operator=(const RedisTestServer&) = delete;
  ~RedisTestServer();

  // The folder the socket, config and log are in (mode 0700; tests may put files there).
  const std::string& dir() const { return dir_; }
  const std::string& socket_path() const { return socket_path_; }
  // The address RedisStateStoreOptions takes: "unix:<socket_path>".
  std::string address() const { return "unix:" + socket_path_; }
  bool running() const { return child_ != nullptr; }

  // Starts the server (again) and waits until it answers. FailedPrecondition while it runs.
  absl::Status Start();
  // SIGTERM, then SIGKILL after a grace period; waits for the exit. Idempotent.
  absl::Status Stop();
  // SIGSTOP / SIGCONT: a paused server accepts connections but answers nothing (a hung Redis).
  absl::Status Pause();
  absl::Status Resume();

  // Runs one command on a connection of its own (authenticating first when there is a
  // password), for tests that look at or prepare what is in Redis. The reply: a status or bulk
  // string's text, an integer's digits; NotFound for a nil; a Redis error reply is an error
  // status with its text. Array replies are not supported (Unimplemented).
  absl::StatusOr<std::string> Command(const std::vector<std::string>& args) const;

 private:
  RedisTestServer() = default;

  std::string redis_server_;
  std::string dir_;
  std::string socket_path_;
  std::string config_path_;
  std::string log_path_;
  std::string password_;
  std::unique_ptr<ChildProcess> child_;
};

}  // namespace tessera::testing
