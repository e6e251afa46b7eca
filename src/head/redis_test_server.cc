#include "head/redis_test_server.h"

#include <signal.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string_view>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "base/ignore_status.h"
#include "base/status_macros.h"
#include "base/string_util.h"
#include "process/file_util.h"
#include "process/private_paths.h"
#include "process/unique_fd.h"

namespace tessera::testing {

namespace {

// Generous: redis-server answers within milliseconds, but a loaded CI machine may be slow.
constexpr absl::Duration kStartTimeout = absl::Seconds(20);
constexpr absl::Duration kStopGrace = absl::Seconds(5);
// A unix socket address holds 107 bytes; a long $TMPDIR falls back to /tmp.
constexpr size_t kMaxSocketPath = 100;

bool IsExecutable(const std::string& path) { return ::access(path.c_str(), X_OK) == 0; }

// util-linux's setpriv, nullptr when this system has none.
const char* SetprivPath() {
  for (const char* candidate : {"/usr/bin/setpriv", "/bin/setpriv"}) {
    if (IsExecutable(candidate)) return candidate;
  }
  return nullptr;
}

// A value in redis.conf's quoting (sdssplitargs): "..." with \" and \\ escaped.
std::string ConfigQuote(std::string_view value) {
  std::string out = "\"";
  for (char c : value) {
    if (c == '"' || c == '\\') out.push_back('\\');
    out.push_back(c);
  }
  out.push_back('"');
  return out;
}

// A plain RESP connection over the unix socket: the helper speaks the protocol itself, so it
// does not depend on the client code the tests judge.
class RawConnection {
 public:
  static absl::StatusOr<RawConnection> Open(const std::string& socket_path) {
    RawConnection connection;
    connection.fd_ = UniqueFd(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
    if (!connection.fd_.valid()) return ErrnoStatus(errno, "cannot create a unix socket");
    sockaddr_un address{};
    address.sun_family = AF_UNIX;
    std::memcpy(address.sun_path, socket_path.c_str(), socket_path.size() + 1);
    if (::connect(connection.fd_.get(), reinterpret_cast<const sockaddr*>(&address),
                  sizeof(address)) != 0) {
      return ErrnoStatus(errno, absl::StrCat("cannot connect to ", socket_path));
    }
    const timeval timeout = {5, 0};
    ::setsockopt(connection.fd_.get(), SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof(timeout));
    ::setsockopt(connection.fd_.get(), SOL_SOCKET, SO_SNDTIMEO, &timeout, sizeof(timeout));
    return connection;
  }

  absl::Status Send(const std::vector<std::string>& args) {
    std::string request = absl::StrCat("*", args.size(), "\r\n");
    for (const std::string& arg : args) {
      absl::StrAppend(&request, "$", arg.size(), "\r\n", arg, "\r\n");
    }
    for (std::string_view rest = request; !rest.empty();) {
      const ssize_t n = ::send(fd_.get(), rest.data(), rest.size(), MSG_NOSIGNAL);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) return ErrnoStatus(errno, "cannot send to redis-server");
      rest.remove_prefix(static_cast<size_t>(n));
    }
    return absl::OkStatus();
  }

  absl::StatusOr<std::string> ReadReply() {
    TESSERA_ASSIGN_OR_RETURN(std::string line, ReadLine());
    if (line.empty()) return absl::InternalError("redis-server sent an empty reply line");
    const std::string rest = line.substr(1);
    switch (line[0]) {
      case '+':
      case ':': return rest;
      case '-': return absl::FailedPreconditionError(rest);
      case '$': {
        const long length = std::strtol(rest.c_str(), nullptr, 10);
        if (length < 0) return absl::NotFoundError("nil");
        TESSERA_ASSIGN_OR_RETURN(std::string bulk, ReadExactly(static_cast<size_t>(length) + 2));
        bulk.resize(static_cast<size_t>(length));
        return bulk;
      }
      default: return absl::UnimplementedError(absl::StrCat("reply type ", line.substr(0, 1)));
    }
  }

 private:
  absl::Status Fill() {
    char buffer[4096];
    while (true) {
      const ssize_t n = ::recv(fd_.get(), buffer, sizeof(buffer), 0);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) return ErrnoStatus(errno, "cannot read from redis-server");
      if (n == 0) return absl::UnavailableError("redis-server closed the connection");
      buffered_.append(buffer, static_cast<size_t>(n));
      return absl::OkStatus();
    }
  }
  absl::StatusOr<std::string> ReadLine() {
    size_t end;
    while ((end = buffered_.find("\r\n")) == std::string::npos) TESSERA_RETURN_IF_ERROR(Fill());
    std::string line = buffered_.substr(0, end);
    buffered_.erase(0, end + 2);
    return line;
  }
  absl::StatusOr<std::string> ReadExactly(size_t size) {
    while (buffered_.size() < size) TESSERA_RETURN_IF_ERROR(Fill());
    std::string out = buffered_.substr(0, size);
    buffered_.erase(0, size);
    return out;
  }

  UniqueFd fd_;
  std::string buffered_;
};

// Whether a Redis server answers on `socket_path`: PING gets PONG, or NOAUTH from a server that
// needs a password (it answers all the same).
bool Answers(const std::string& socket_path) {
  auto connection = RawConnection::Open(socket_path);
  if (!connection.ok() || !connection->Send({"PING"}).ok()) return false;
  auto reply = connection->ReadReply();
  return reply.ok() ? *reply == "PONG" : ToStd(reply.status().message()).starts_with("NOAUTH");
}

// The last non-empty line of `path`, for saying why the server would not start.
std::string LastLine(const std::string& path) {
  auto text = ReadWholeFile(path);
  if (!text.ok()) return "(no log)";
  absl::string_view last;
  for (absl::string_view line : absl::StrSplit(*text, '\n')) {
    if (!line.empty()) last = line;
  }
  return std::string(last);
}

}  // namespace

absl::StatusOr<std::string> FindRedisServer() {
  if (const char* chosen = std::getenv("TESSERA_REDIS_SERVER"); chosen != nullptr && *chosen) {
    if (IsExecutable(chosen)) return std::string(chosen);
    return absl::NotFoundError(
        absl::StrCat("TESSERA_REDIS_SERVER=", chosen, " is not an executable file"));
  }
  if (const char* path = std::getenv("PATH"); path != nullptr) {
    for (absl::string_view folder : absl::StrSplit(path, ':')) {
      if (folder.empty()) continue;
      const std::string candidate = absl::StrCat(folder, "/redis-server");
      if (IsExecutable(candidate)) return candidate;
    }
  }
  for (const char* candidate : {"/usr/bin/redis-server", "/usr/sbin/redis-server"}) {
    if (IsExecutable(candidate)) return std::string(candidate);
  }
  return absl::NotFoundError(
      "redis-server is not installed (run scripts/setup, or apt-get install redis-server)");
}

absl::StatusOr<std::unique_ptr<RedisTestServer>> RedisTestServer::Create(
    RedisTestServerOptions options) {
  TESSERA_ASSIGN_OR_RETURN(std::string redis_server, FindRedisServer());
  std::error_code ec;
  std::string base = std::filesystem::temp_directory_path(ec).string();
  if (ec || base.size() + 40 > kMaxSocketPath) base = "/tmp";
  std::string pattern = base + "/tessera-redis-XXXXXX";
  if (::mkdtemp(pattern.data()) == nullptr) {
    return ErrnoStatus(errno, absl::StrCat("cannot create a folder from ", pattern));
  }
  std::unique_ptr<RedisTestServer> server(new RedisTestServer());
  server->redis_server_ = std::move(redis_server);
  server->dir_ = pattern;
  server->socket_path_ = server->dir_ + "/redis.sock";
  server->config_path_ = server->dir_ + "/redis.conf";
  server->log_path_ = server->dir_ + "/redis.log";
  server->password_ = options.password;
  std::string config =
      absl::StrCat("port 0\n",  // no TCP listener at all
                   "unixsocket ", ConfigQuote(server->socket_path_), "\n", "unixsocketperm 700\n",
                   "save \"\"\n",  // no RDB snapshots
                   options.persistent ? "appendonly yes\nappendfsync always\n" : "appendonly no\n",
                   "dir ", ConfigQuote(server->dir_), "\n", "daemonize no\n", "databases 1\n");
  if (!options.password.empty()) {
    absl::StrAppend(&config, "requirepass ", ConfigQuote(options.password), "\n");
  }
  TESSERA_RETURN_IF_ERROR(WritePrivateFileAtomically(server->config_path_, config));
  TESSERA_RETURN_IF_ERROR(server->Start());
  return server;
}

RedisTestServer::~RedisTestServer() {
  IgnoreStatus(Stop(), "a destructor: nothing is left to tell of a stop that failed");
  std::error_code ignored;
  if (!dir_.empty()) std::filesystem::remove_all(dir_, ignored);
}

absl::Status RedisTestServer::Start() {
  if (child_ != nullptr) return absl::FailedPreconditionError("redis-server is already running");
  std::error_code ignored;
  std::filesystem::remove(socket_path_, ignored);  // left behind by a SIGKILLed server
  ChildSpec spec;
  // setpriv (util-linux) makes the kernel SIGKILL the server when the thread that started it
  // dies, so even a test process that crashes leaves no server behind.
  if (const char* setpriv = SetprivPath(); setpriv != nullptr) {
    spec.argv = {setpriv, "--pdeathsig", "KILL", redis_server_, config_path_};
  } else {
    spec.argv = {redis_server_, config_path_};
  }
  spec.env = {{"PATH", "/usr/local/bin:/usr/bin:/bin"}};
  spec.cwd = dir_;
  spec.stdout_path = log_path_;
  spec.stderr_path = log_path_;
  TESSERA_ASSIGN_OR_RETURN(child_, ChildProcess::Spawn(spec));
  const absl::Time deadline = absl::Now() + kStartTimeout;
  while (!Answers(socket_path_)) {
    auto exited = child_->HasExited();
    if (!exited.ok() || *exited) {
      auto status = child_->Wait();
      child_.reset();
      return absl::InternalError(
          absl::StrCat("redis-server exited before answering (",
                       status.ok() ? DescribeExit(*status) : std::string(status.status().message()),
                       "): ", LastLine(log_path_)));
    }
    if (absl::Now() > deadline) {
      IgnoreStatus(Stop(), "the error that matters is the timeout, returned below");
      return absl::DeadlineExceededError(
          absl::StrCat("redis-server did not answer on ", socket_path_, " within ",
                       absl::FormatDuration(kStartTimeout), ": ", LastLine(log_path_)));
    }
    absl::SleepFor(absl::Milliseconds(5));
  }
  return absl::OkStatus();
}

absl::Status RedisTestServer::Stop() {
  if (child_ == nullptr) return absl::OkStatus();
  IgnoreStatus(child_->Signal(SIGCONT),  // a paused server must be able to act on SIGTERM
               "one that exited already is what Terminate reports below");
  auto exit = child_->Terminate(kStopGrace);
  child_.reset();
  if (!exit.ok()) return exit.status();
  return absl::OkStatus();
}

absl::Status RedisTestServer::Pause() {
  if (child_ == nullptr) return absl::FailedPreconditionError("redis-server is not running");
  return child_->Signal(SIGSTOP);
}

absl::Status RedisTestServer::Resume() {
  if (child_ == nullptr) return absl::FailedPreconditionError("redis-server is not running");
  return child_->Signal(SIGCONT);
}

absl::StatusOr<std::string> RedisTestServer::Command(const std::vector<std::string>& args) const {
  TESSERA_ASSIGN_OR_RETURN(RawConnection connection, RawConnection::Open(socket_path_));
  if (!password_.empty()) {
    TESSERA_RETURN_IF_ERROR(connection.Send({"AUTH", password_}));
    TESSERA_RETURN_IF_ERROR(connection.ReadReply().status());
  }
  TESSERA_RETURN_IF_ERROR(connection.Send(args));
  return connection.ReadReply();
}

}  // namespace tessera::testing
