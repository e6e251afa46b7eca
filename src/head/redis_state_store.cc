#include "head/redis_state_store.h"

#include <fcntl.h>
#include <hiredis/hiredis.h>
#include <pthread.h>
#include <signal.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <map>

#include "absl/strings/str_cat.h"
#include "base/string_util.h"
#include "process/file_util.h"
#include "process/private_paths.h"
#include "process/unique_fd.h"

namespace tessera {

namespace {

constexpr size_t kMaxPasswordBytes = 4096;
// Fields asked for per HSCAN page: large enough that a table of thousands of entries takes a
// few round trips, small enough that one page never holds Redis up.
constexpr std::string_view kScanCount = "1000";
constexpr absl::Duration kFirstBackoff = absl::Milliseconds(20);
constexpr absl::Duration kMaxBackoff = absl::Milliseconds(500);

// `text` on one line: control characters (a reply could hold any) become spaces.
std::string OneLine(std::string_view text) {
  std::string out(text);
  for (char& c : out) {
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) c = ' ';
  }
  return out;
}

std::string ReplyString(const redisReply& reply) {
  return reply.str == nullptr ? std::string() : std::string(reply.str, reply.len);
}

std::string_view FirstWord(std::string_view text) { return text.substr(0, text.find(' ')); }

// An error reply as a status whose message is the reason alone. Unavailable for states Redis
// leaves by itself soon (loading its data, a script running, a failover), which are retried.
absl::Status ErrorReplyStatus(std::string_view error) {
  const std::string text = OneLine(error);
  const std::string_view word = FirstWord(text);
  if (word == "LOADING" || word == "BUSY" || word == "TRYAGAIN" || word == "MASTERDOWN" ||
      word == "CLUSTERDOWN") {
    return absl::UnavailableError(text);
  }
  if (word == "NOAUTH") {
    return absl::UnauthenticatedError(
        absl::StrCat("the server needs a password and none was given (", text,
                     "); give a password file (--redis-password-file)"));
  }
  if (word == "NOPERM") return absl::PermissionDeniedError(text);
  if (word == "WRONGTYPE") {
    return absl::FailedPreconditionError(
        absl::StrCat(text, " (the key is not a hash: does another program use this key prefix?)"));
  }
  if (word == "OOM") return absl::ResourceExhaustedError(text);
  if (word == "READONLY" || word == "MISCONF") return absl::FailedPreconditionError(text);
  return absl::InternalError(text);
}

// Blocks SIGPIPE in the calling thread while it lives, and discards a SIGPIPE raised meanwhile:
// hiredis write()s to the socket, and a server that closed the connection must give EPIPE (a
// dropped connection, retried) rather than kill the head. The signal of a failed write is
// directed at the writing thread, so the thread's own mask and pending set are enough.
class ScopedSigpipeBlock {
 public:
  ScopedSigpipeBlock() {
    sigemptyset(&pipe_);
    sigaddset(&pipe_, SIGPIPE);
    sigset_t pending;
    sigemptyset(&pending);
    ::sigpending(&pending);
    pending_before_ = sigismember(&pending, SIGPIPE) == 1;
    ::pthread_sigmask(SIG_BLOCK, &pipe_, &previous_);
  }
  ~ScopedSigpipeBlock() {
    if (!pending_before_) {
      sigset_t pending;
      sigemptyset(&pending);
      ::sigpending(&pending);
      if (sigismember(&pending, SIGPIPE) == 1) {
        const timespec now = {0, 0};
        while (::sigtimedwait(&pipe_, nullptr, &now) < 0 && errno == EINTR) {
        }
      }
    }
    ::pthread_sigmask(SIG_SETMASK, &previous_, nullptr);
  }
  ScopedSigpipeBlock(const ScopedSigpipeBlock&) = delete;
  ScopedSigpipeBlock& operator=(const ScopedSigpipeBlock&) = delete;

 private:
  sigset_t pipe_;
  sigset_t previous_;
  bool pending_before_ = false;
};

// `prefix` as a Redis glob pattern matching the fields that start with it.
std::string GlobForPrefix(std::string_view prefix) {
  std::string pattern;
  pattern.reserve(prefix.size() + 1);
  for (char c : prefix) {
    if (c == '*' || c == '?' || c == '[' || c == ']' || c == '\\') pattern.push_back('\\');
    pattern.push_back(c);
  }
  pattern.push_back('*');
  return pattern;
}

// Why a command got no reply. A read that timed out is an I/O error whose text is EAGAIN's.
std::string LostConnectionReason(const redisContext& context,
                                 const RedisStateStoreOptions& options) {
  const std::string error = OneLine(context.errstr);
  if (context.err == REDIS_ERR_IO && error == std::strerror(EAGAIN)) {
    return absl::StrCat("no reply within ", absl::FormatDuration(options.command_timeout),
                        " (the command timeout)");
  }
  return absl::StrCat("connection lost (", error, ")");
}

absl::Status WithPrefix(const absl::Status& status, std::string_view prefix) {
  return absl::Status(status.code(), absl::StrCat(ToAbsl(prefix), status.message()));
}

}  // namespace

absl::StatusOr<RedisAddress> ParseRedisAddress(std::string_view address) {
  const std::string shown(address);
  auto invalid = [&shown](std::string_view why) {
    return absl::InvalidArgumentError(
        absl::StrCat("redis address ", Quote(shown), ": ", ToAbsl(why)));
  };
  RedisAddress out;
  out.text = shown;
  if (address.empty()) {
    return absl::InvalidArgumentError(
        "the redis address is empty (give HOST:PORT or unix:/path/to/socket)");
  }
  if (address.find("://") != std::string_view::npos) {
    return invalid("give HOST:PORT or unix:/path/to/socket, not a URL");
  }
  if (address.starts_with("unix:")) {
    out.kind = RedisAddress::Kind::kUnix;
    out.path = std::string(address.substr(5));
    if (out.path.empty() || out.path[0] != '/') {
      return invalid("the socket must be an absolute path (unix:/path/to/socket)");
    }
    if (out.path.size() >= sizeof(sockaddr_un{}.sun_path)) {
      return invalid(absl::StrCat("the socket path is longer than the ",
                                  sizeof(sockaddr_un{}.sun_path) - 1,
                                  " bytes a unix socket address holds"));
    }
    return out;
  }
  out.kind = RedisAddress::Kind::kTcp;
  std::string_view port_text;
  if (address.starts_with("[")) {
    const size_t close = address.find(']');
    if (close == std::string_view::npos || close + 1 >= address.size() ||
        address[close + 1] != ':') {
      return invalid("an IPv6 address must be written [ADDRESS]:PORT");
    }
    out.host = std::string(address.substr(1, close - 1));
    port_text = address.substr(close + 2);
  } else {
    const size_t colon = address.rfind(':');
    if (colon == std::string_view::npos) return invalid("no port (give HOST:PORT)");
    out.host = std::string(address.substr(0, colon));
    if (out.host.find(':') != std::string::npos) {
      return invalid("an IPv6 address must be written [ADDRESS]:PORT");
    }
    port_text = address.substr(colon + 1);
  }
  if (out.host.empty()) return invalid("no host (give HOST:PORT)");
  int port = 0;
  const auto [end, error] =
      std::from_chars(port_text.data(), port_text.data() + port_text.size(), port);
  if (port_text.empty() || error != std::errc() || end != port_text.data() + port_text.size() ||
      port < 1 || port > 65535) {
    return invalid("the port must be a number from 1 to 65535");
  }
  out.port = port;
  return out;
}

absl::StatusOr<std::string> ReadRedisPasswordFile(const std::string& path) {
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY));
  if (!fd.valid()) {
    return ErrnoStatus(errno, absl::StrCat("cannot open the redis password file ", path));
  }
  if (absl::Status status = CheckPrivateFile(fd.get(), path); !status.ok()) {
    return absl::PermissionDeniedError(absl::StrCat("redis password file: ", status.message()));
  }
  std::string content;
  char buffer[512];
  while (true) {
    const ssize_t n = ::read(fd.get(), buffer, sizeof(buffer));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      return ErrnoStatus(errno, absl::StrCat("cannot read the redis password file ", path));
    }
    if (n == 0) break;
    content.append(buffer, static_cast<size_t>(n));
    if (content.size() > kMaxPasswordBytes + 2) {
      return absl::InvalidArgumentError(absl::StrCat(
          "the redis password file ", path, " is larger than ", kMaxPasswordBytes, " bytes"));
    }
  }
  if (content.ends_with('\n')) content.pop_back();
  if (content.ends_with('\r')) content.pop_back();
  if (content.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("the redis password file ", path, " is empty"));
  }
  if (content.find_first_of(std::string_view("\n\r\0", 3)) != std::string::npos) {
    return absl::InvalidArgumentError(
        absl::StrCat("the redis password file ", path,
                     " must hold the password on one line (it holds a line break or a NUL byte)"));
  }
  return content;
}

void RedisStateStore::ContextDeleter::operator()(redisContext* context) const {
  if (context != nullptr) redisFree(context);
}

void RedisStateStore::ReplyDeleter::operator()(redisReply* reply) const {
  if (reply != nullptr) freeReplyObject(reply);
}

RedisStateStore::RedisStateStore(RedisStateStoreOptions options, RedisAddress address,
                                 std::string password)
    : options_(std::move(options)), address_(std::move(address)), password_(std::move(password)) {}

RedisStateStore::~RedisStateStore() = default;

absl::StatusOr<std::unique_ptr<RedisStateStore>> RedisStateStore::Create(
    RedisStateStoreOptions options) {
  auto address = ParseRedisAddress(options.address);
  if (!address.ok()) return address.status();
  if (options.connect_timeout <= absl::ZeroDuration() ||
      options.command_timeout <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError("redis connect and command timeouts must be positive");
  }
  if (options.reconnect_budget < absl::ZeroDuration()) {
    return absl::InvalidArgumentError("the redis reconnect budget must not be negative");
  }
  if (options.clock == nullptr) return absl::InvalidArgumentError("the redis store needs a clock");
  std::string password;
  if (!options.password_file.empty()) {
    auto read = ReadRedisPasswordFile(options.password_file);
    if (!read.ok()) return read.status();
    password = *std::move(read);
  }
  std::unique_ptr<RedisStateStore> store(
      new RedisStateStore(std::move(options), *std::move(address), std::move(password)));
  {
    absl::MutexLock lock(&store->mu_);
    if (absl::Status connected = store->Connect(); !connected.ok()) {
      return WithPrefix(connected, absl::StrCat("redis at ", store->address_.text, ": "));
    }
  }
  // PING proves the connection is usable: it is where a server that needs a password says so.
  std::vector<std::string_view> ping = {"PING"};
  auto reply = store->Run(ping);
  if (!reply.ok()) return reply.status();
  return store;
}

absl::Status RedisStateStore::Connect() const {
  context_.reset();
  ScopedSigpipeBlock no_sigpipe;
  const timeval connect_timeout = absl::ToTimeval(options_.connect_timeout);
  Context context(
      address_.kind == RedisAddress::Kind::kUnix
          ? redisConnectUnixWithTimeout(address_.path.c_str(), connect_timeout)
          : redisConnectWithTimeout(address_.host.c_str(), address_.port, connect_timeout));
  if (context == nullptr) return absl::ResourceExhaustedError("cannot allocate a connection");
  if (context->err != 0) {
    return absl::UnavailableError(absl::StrCat("cannot connect (", OneLine(context->errstr), ")"));
  }
  if (redisSetTimeout(context.get(), absl::ToTimeval(options_.command_timeout)) != REDIS_OK) {
    return absl::UnavailableError(
        absl::StrCat("cannot set the command timeout (", OneLine(context->errstr), ")"));
  }
  // Notices a peer that vanished without closing (a host that went down) between calls.
  if (address_.kind == RedisAddress::Kind::kTcp &&
      redisEnableKeepAlive(context.get()) != REDIS_OK) {
    return absl::UnavailableError(
        absl::StrCat("cannot enable TCP keepalive (", OneLine(context->errstr), ")"));
  }
  if (!password_.empty()) {
    const char* argv[] = {"AUTH", password_.data()};
    const size_t lengths[] = {4, password_.size()};
    Reply reply(static_cast<redisReply*>(redisCommandArgv(context.get(), 2, argv, lengths)));
    if (reply == nullptr) {
      return absl::UnavailableError(
          absl::StrCat("AUTH: ", LostConnectionReason(*context, options_)));
    }
    if (reply->type == REDIS_REPLY_ERROR) {
      // Redis's replies to AUTH never repeat the password; they are safe to show.
      const std::string error = OneLine(ReplyString(*reply));
      if (FirstWord(error) == "WRONGPASS" || error.find("invalid password") != std::string::npos) {
        return absl::UnauthenticatedError(absl::StrCat("AUTH: the server refused the password in ",
                                                       options_.password_file, " (", error, ")"));
      }
      if (error.find("without any password configured") != std::string::npos ||
          error.find("no password is set") != std::string::npos) {
        return absl::FailedPreconditionError(
            absl::StrCat("AUTH: a password file (", options_.password_file,
                         ") was given but the server has no password set (", error, ")"));
      }
      return WithPrefix(ErrorReplyStatus(error), "AUTH: ");
    }
  }
  context_ = std::move(context);
  unavailable_ = false;
  return absl::OkStatus();
}

std::string RedisStateStore::CommandPrefix(const std::vector<std::string_view>& argv) const {
  std::string out = absl::StrCat("redis at ", address_.text, ": ", ToAbsl(argv[0]));
  if (argv.size() > 1) absl::StrAppend(&out, " ", OneLine(argv[1]));
  absl::StrAppend(&out, ": ");
  return out;
}

std::string RedisStateStore::HashKey(std::string_view table) const {
  return absl::StrCat(options_.key_prefix, ToAbsl(table));
}

absl::StatusOr<RedisStateStore::Reply> RedisStateStore::Run(
    const std::vector<std::string_view>& argv) const {
  std::vector<const char*> pointers;
  std::vector<size_t> lengths;
  for (std::string_view arg : argv) {
    pointers.push_back(arg.data());
    lengths.push_back(arg.size());
  }
  const std::string what = CommandPrefix(argv);
  absl::MutexLock lock(&mu_);
  std::optional<absl::Time> deadline;
  absl::Duration backoff = kFirstBackoff;
  bool retried_at_once = false;
  while (true) {
    absl::Status failure;
    // A connection that dropped between calls (the usual case after a Redis restart) is made
    // again at once, without waiting first.
    bool wait_before_retry = true;
    if (context_ == nullptr) {
      failure = Connect();
    }
    if (failure.ok()) {
      Reply reply;
      {
        ScopedSigpipeBlock no_sigpipe;
        reply.reset(static_cast<redisReply*>(redisCommandArgv(
            context_.get(), static_cast<int>(argv.size()), pointers.data(), lengths.data())));
      }
      if (reply == nullptr) {
        // hiredis leaves a context unusable after any I/O error (a timeout included).
        failure = absl::UnavailableError(LostConnectionReason(*context_, options_));
        context_.reset();
        wait_before_retry = retried_at_once;
        retried_at_once = true;
      } else if (reply->type == REDIS_REPLY_ERROR) {
        failure = ErrorReplyStatus(ReplyString(*reply));
      } else {
        return reply;
      }
    }
    if (failure.code() != absl::StatusCode::kUnavailable) return WithPrefix(failure, what);
    if (unavailable_ && wait_before_retry) {
      return absl::UnavailableError(absl::StrCat(
          what, failure.message(), "; Redis has not answered since an earlier call gave up"));
    }
    const absl::Time now = options_.clock->Now();
    if (!deadline.has_value()) deadline = now + options_.reconnect_budget;
    if (now >= *deadline && wait_before_retry) {
      unavailable_ = true;
      return absl::UnavailableError(absl::StrCat(what, failure.message(), "; gave up after ",
                                                 absl::FormatDuration(options_.reconnect_budget),
                                                 " of retrying"));
    }
    if (wait_before_retry) {
      options_.clock->SleepFor(std::min(backoff, *deadline - now));
      backoff = std::min(backoff * 2, kMaxBackoff);
    }
  }
}

absl::Status RedisStateStore::Put(std::string_view table, std::string_view key,
                                  std::string_view value) {
  const std::string hash = HashKey(table);
  auto reply = Run({"HSET", hash, key, value});
  if (!reply.ok()) return reply.status();
  if ((*reply)->type != REDIS_REPLY_INTEGER) {
    return absl::InternalError(absl::StrCat("redis at ", address_.text, ": HSET ", OneLine(hash),
                                            ": unexpected reply type ", (*reply)->type));
  }
  return absl::OkStatus();
}

absl::Status RedisStateStore::Ping() const {
  auto reply = Run({"PING"});
  return reply.ok() ? absl::OkStatus() : reply.status();
}

absl::StatusOr<std::optional<std::string>> RedisStateStore::Get(std::string_view table,
                                                                std::string_view key) const {
  const std::string hash = HashKey(table);
  auto reply = Run({"HGET", hash, key});
  if (!reply.ok()) return reply.status();
  if ((*reply)->type == REDIS_REPLY_NIL) return std::optional<std::string>();
  if ((*reply)->type != REDIS_REPLY_STRING) {
    return absl::InternalError(absl::StrCat("redis at ", address_.text, ": HGET ", OneLine(hash),
                                            ": unexpected reply type ", (*reply)->type));
  }
  return std::optional<std::string>(ReplyString(**reply));
}

absl::StatusOr<bool> RedisStateStore::Delete(std::string_view table, std::string_view key) {
  const std::string hash = HashKey(table);
  auto reply = Run({"HDEL", hash, key});
  if (!reply.ok()) return reply.status();
  if ((*reply)->type != REDIS_REPLY_INTEGER) {
    return absl::InternalError(absl::StrCat("redis at ", address_.text, ": HDEL ", OneLine(hash),
                                            ": unexpected reply type ", (*reply)->type));
  }
  return (*reply)->integer > 0;
}

absl::StatusOr<std::vector<std::pair<std::string, std::string>>> RedisStateStore::List(
    std::string_view table, std::string_view prefix) const {
  const std::string hash = HashKey(table);
  const std::string pattern = GlobForPrefix(prefix);
  auto malformed = [&](std::string_view what) {
    return absl::InternalError(absl::StrCat("redis at ", address_.text, ": HSCAN ", OneLine(hash),
                                            ": malformed reply (", ToAbsl(what), ")"));
  };
  // HSCAN may return a field twice (while Redis resizes the hash); the map keeps one, sorted.
  std::map<std::string, std::string> entries;
  std::string cursor = "0";
  do {
    std::vector<std::string_view> argv = {"HSCAN", hash, cursor};
    if (!prefix.empty()) argv.insert(argv.end(), {"MATCH", pattern});
    argv.insert(argv.end(), {"COUNT", kScanCount});
    auto reply = Run(argv);
    if (!reply.ok()) return reply.status();
    const redisReply& page = **reply;
    if (page.type != REDIS_REPLY_ARRAY || page.elements != 2 ||
        page.element[0]->type != REDIS_REPLY_STRING || page.element[1]->type != REDIS_REPLY_ARRAY) {
      return malformed("not a cursor and an array");
    }
    const redisReply& fields = *page.element[1];
    if (fields.elements % 2 != 0) return malformed("an odd number of fields and values");
    for (size_t i = 0; i < fields.elements; i += 2) {
      const redisReply* field = fields.element[i];
      const redisReply* value = fields.element[i + 1];
      if (field->type != REDIS_REPLY_STRING || value->type != REDIS_REPLY_STRING) {
        return malformed("a field or value that is not a string");
      }
      std::string name = ReplyString(*field);
      // MATCH is a glob: the exact prefix test is ours.
      if (!std::string_view(name).starts_with(prefix)) continue;
      entries.insert_or_assign(std::move(name), ReplyString(*value));
    }
    cursor = ReplyString(*page.element[0]);
  } while (cursor != "0");
  std::vector<std::pair<std::string, std::string>> out;
  out.reserve(entries.size());
  for (auto& [key, value] : entries) out.emplace_back(key, std::move(value));
  return out;
}

}  // namespace tessera
