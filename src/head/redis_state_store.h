// RedisStateStore: a StateStore kept in a Redis server (through hiredis), so the head's tables
// outlive the head process.
//
//   RedisStateStoreOptions options;
//   options.address = "unix:/run/redis/redis-server.sock";  // or "redis.internal:6379"
//   options.password_file = "/etc/tessera/redis.password";  // optional; mode 0600
//   TESSERA_ASSIGN_OR_RETURN(std::unique_ptr<RedisStateStore> store,
//                            RedisStateStore::Create(options));
//
// Layout: table T is the Redis hash "<key_prefix>T"; a key is a field of that hash and its value
// the field's value, both binary-safe (NUL bytes and large values are kept exactly). Two clusters
// share one Redis by using different key prefixes. List walks the hash with HSCAN: it is not a
// snapshot (an entry written while it runs may or may not be listed; an entry left alone
// throughout always is), and the result is sorted by key, bytewise, as StateStore says.
//
// Create connects, authenticates and PINGs once, without retrying: an unreachable server, one
// that needs a password none was given for, or a refused password fail there, with a one-line
// error. Afterwards a connection that drops (Redis restarted, a proxy closed it, a command timed
// out) is made again and the call retried for up to `reconnect_budget`; past it the call fails
// with Unavailable naming the address (so a call takes at most about the budget plus one
// attempt's connect and command timeouts). Until a connection succeeds again, later calls make one
// attempt each and fail at once, so a Redis that stays down does not stall every caller for the
// whole budget. Put and Get are idempotent; a Delete retried after its connection dropped may
// report false when the lost attempt had already removed the key.
//
// Errors are one line, "redis at ADDRESS: COMMAND KEY: reason", and never hold the password.
//
// Thread-safe: one connection behind one mutex, so calls run one at a time (the head's calls are
// small; while Redis does not answer, every caller waits its turn behind the one retrying).
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "base/clock.h"
#include "head/state_store.h"

struct redisContext;
struct redisReply;

namespace tessera {

// Where a Redis server listens: "HOST:PORT" (a name, an IPv4 address, or an IPv6 address in
// brackets) or "unix:/absolute/path/to/socket".
struct RedisAddress {
  enum class Kind { kTcp, kUnix };
  Kind kind = Kind::kTcp;
  std::string host;  // kTcp, without brackets
  int port = 0;      // kTcp
  std::string path;  // kUnix
  std::string text;  // as given, for messages
};

// InvalidArgument, naming the problem, for anything else (URLs such as redis://... included).
absl::StatusOr<RedisAddress> ParseRedisAddress(std::string_view address);

// The password in `path`: the file must be a regular file of this user that group and others
// can neither read nor write (CheckPrivateFile), and hold the password on its one line (a final
// newline is dropped). Errors name the file, never its content.
absl::StatusOr<std::string> ReadRedisPasswordFile(const std::string& path);

struct RedisStateStoreOptions {
  std::string address;        // required; see RedisAddress
  std::string password_file;  // "": the server needs no password
  // Put before every table name: "<key_prefix><table>" is that table's hash.
  std::string key_prefix = "tessera:";
  absl::Duration connect_timeout = absl::Seconds(2);
  // Each command's reply must arrive within this (redisSetTimeout), else the connection is
  // dropped and made again.
  absl::Duration command_timeout = absl::Seconds(5);
  // How long one call keeps reconnecting and retrying after its connection failed.
  absl::Duration reconnect_budget = absl::Seconds(5);
  // Time and the sleeps between reconnection attempts; not owned, must outlive the store.
  Clock* clock = Clock::Real();
};

class RedisStateStore : public StateStore {
 public:
  static absl::StatusOr<std::unique_ptr<RedisStateStore>> Create(RedisStateStoreOptions options);
  ~RedisStateStore() override;

  absl::Status Put(std::string_view table, std::string_view key, std::string_view value) override;
  absl::StatusOr<std::optional<std::string>> Get(std::string_view table,
                                                 std::string_view key) const override;
  absl::StatusOr<bool> Delete(std::string_view table, std::string_view key) override;
  absl::StatusOr<std::vector<std::pair<std::string, std::string>>> List(
      std::string_view table, std::string_view prefix = "") const override;
  // PING, retried as every call is.
  absl::Status Ping() const override;

  const std::string& address() const { return address_.text; }

 private:
  struct ContextDeleter {
    void operator()(redisContext* context) const;
  };
  struct ReplyDeleter {
    void operator()(redisReply* reply) const;
  };
  using Context = std::unique_ptr<redisContext, ContextDeleter>;
  using Reply = std::unique_ptr<redisReply, ReplyDeleter>;

  RedisStateStore(RedisStateStoreOptions options, RedisAddress address, std::string password);

  // Connects and authenticates once, replacing any connection. Unavailable when the server
  // cannot be reached or is briefly unable to answer (worth retrying); another code when it
  // answered and refused (not worth retrying). The message is the reason alone.
  absl::Status Connect() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Runs `argv` (argv[0] the command, argv[1] the Redis key) on the connection, connecting
  // first when there is none and reconnecting as the class comment says. A reply that is a
  // Redis error becomes a status; any other reply is returned.
  absl::StatusOr<Reply> Run(const std::vector<std::string_view>& argv) const
      ABSL_LOCKS_EXCLUDED(mu_);
  // "redis at ADDRESS: COMMAND KEY: ", how the messages about running `argv` start.
  std::string CommandPrefix(const std::vector<std::string_view>& argv) const;
  std::string HashKey(std::string_view table) const;

  const RedisStateStoreOptions options_;
  const RedisAddress address_;
  const std::string password_;

  mutable absl::Mutex mu_;
  mutable Context context_ ABSL_GUARDED_BY(mu_);
  // Set when a call used up its reconnect budget; cleared by the next successful connection.
  mutable bool unavailable_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace tessera
