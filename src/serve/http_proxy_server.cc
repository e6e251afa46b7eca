#include "serve/http_proxy_server.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <deque>
#include <set>
#include <tuple>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/random/random.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "base/string_util.h"

namespace tessera::serve {
namespace {

constexpr uint64_t kListenerId = 0;
constexpr uint64_t kWakeId = 1;
constexpr uint64_t kFirstConnectionId = 2;
constexpr int kEpollBatch = 128;
constexpr int kListenBacklog = 1024;
constexpr size_t kReadBufferBytes = 64 * 1024;
// Reads of one connection per readiness event: a client sending a large body does not keep the
// loop from the others (level-triggered epoll brings it back).
constexpr int kMaxReadsPerEvent = 16;
constexpr int kMaxIovecs = 64;
// After a connection's last response, what the client still sends is read and dropped for at
// most this long and this much, so that closing does not reset the connection under the
// response in flight (a client still sending a refused body would lose the answer).
constexpr absl::Duration kLinger = absl::Seconds(2);
constexpr size_t kMaxLingerBytes = 1024 * 1024;
// After running out of descriptors, accepting pauses this long instead of spinning.
constexpr absl::Duration kAcceptPause = absl::Milliseconds(100);
constexpr char kTextPlain[] = "text/plain; charset=utf-8";
constexpr size_t kMaxBodyLimit = size_t{1} << 30;

// `seconds` as Python prints a float ("10.0", "2.5"): Ray's 408 text interpolates its
// request_timeout_s, a float, and clients match on that text.
std::string PythonFloatText(double seconds) {
  char buffer[64];
  // The shortest form that parses back to the same double, as Python's repr.
  const std::to_chars_result result = std::to_chars(buffer, buffer + sizeof(buffer), seconds);
  std::string text(buffer, result.ptr);  // 64 bytes hold any double: to_chars cannot fail
  // A whole number ("10") gets Python's ".0"; "1e+16", "inf" and "nan" are Python's already.
  if (text.find_first_of(".en") == std::string::npos) text += ".0";
  return text;
}

std::string SystemError(std::string_view what, int error) {
  return absl::StrCat(ToAbsl(what), ": ", std::strerror(error));
}

absl::Status ValidateOptions(const HttpProxyServerOptions& options) {
  if (options.port < 0 || options.port > 65535) {
    return absl::InvalidArgumentError(absl::StrCat("port ", options.port, " is not 0..65535"));
  }
  if (options.keep_alive_timeout <= absl::ZeroDuration() ||
      options.head_read_timeout <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError("keep_alive_timeout and head_read_timeout must be positive");
  }
  if (options.request_timeout.has_value() && *options.request_timeout <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError("request_timeout must be positive when set");
  }
  if (options.max_head_bytes < 1024 || options.max_head_bytes > 1024 * 1024) {
    return absl::InvalidArgumentError(
        absl::StrCat("max_head_bytes ", options.max_head_bytes, " is not 1 KiB..1 MiB"));
  }
  if (options.max_header_count < 1 || options.max_header_count > 10000) {
    return absl::InvalidArgumentError(
        absl::StrCat("max_header_count ", options.max_header_count, " is not 1..10000"));
  }
  if (options.max_body_bytes > kMaxBodyLimit) {
    return absl::InvalidArgumentError(
        absl::StrCat("max_body_bytes ", options.max_body_bytes, " is not 0..1 GiB"));
  }
  if (options.max_connections < 1 || options.max_connections > 1000000) {
    return absl::InvalidArgumentError(
        absl::StrCat("max_connections ", options.max_connections, " is not 1..1000000"));
  }
  if (options.max_buffered_bytes < 64 * 1024 || options.max_buffered_bytes > kMaxBodyLimit) {
    return absl::InvalidArgumentError(
        absl::StrCat("max_buffered_bytes ", options.max_buffered_bytes, " is not 64 KiB..1 GiB"));
  }
  return absl::OkStatus();
}

// A listening non-blocking socket on `address`, or -1 with `failure` saying why not.
int ListenOn(const sockaddr* address, socklen_t size, bool dual_stack, std::string& failure) {
  const int fd = socket(address->sa_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0) {
    failure = SystemError("socket", errno);
    return -1;
  }
  const int on = 1;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &on, sizeof(on));
  if (dual_stack) {
    const int off = 0;  // "::" takes IPv4 clients too
    setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &off, sizeof(off));
  }
  const bool bound = bind(fd, address, size) == 0;
  if (!bound || listen(fd, kListenBacklog) != 0) {
    failure = SystemError(bound ? "listen" : "bind", errno);
    close(fd);
    return -1;
  }
  return fd;
}

// "" is every address: IPv6 and IPv4 on one socket where the host has IPv6, else IPv4.
absl::StatusOr<int> Listen(const std::string& host, int port) {
  const std::string where = absl::StrCat(host.empty() ? "*" : host, ":", port);
  std::string failure = "no address to bind";
  int fd = -1;
  if (host.empty()) {
    sockaddr_in6 any6{};
    any6.sin6_family = AF_INET6;
    any6.sin6_addr = in6addr_any;
    any6.sin6_port = htons(static_cast<uint16_t>(port));
    fd = ListenOn(reinterpret_cast<const sockaddr*>(&any6), sizeof(any6), true, failure);
    if (fd < 0) {
      sockaddr_in any4{};
      any4.sin_family = AF_INET;
      any4.sin_addr.s_addr = htonl(INADDR_ANY);
      any4.sin_port = htons(static_cast<uint16_t>(port));
      fd = ListenOn(reinterpret_cast<const sockaddr*>(&any4), sizeof(any4), false, failure);
    }
  } else {
    addrinfo hints{};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
    addrinfo* found = nullptr;
    if (const int rc = getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &found);
        rc != 0) {
      return absl::UnavailableError(absl::StrCat("cannot resolve ", where, ": ", gai_strerror(rc)));
    }
    for (addrinfo* a = found; a != nullptr && fd < 0; a = a->ai_next) {
      fd = ListenOn(a->ai_addr, a->ai_addrlen, false, failure);
    }
    freeaddrinfo(found);
  }
  if (fd < 0)
    return absl::UnavailableError(absl::StrCat("cannot listen on ", where, ": ", failure));
  return fd;
}

int BoundPort(int fd) {
  sockaddr_storage bound{};
  socklen_t size = sizeof(bound);
  if (getsockname(fd, reinterpret_cast<sockaddr*>(&bound), &size) != 0) return 0;
  if (bound.ss_family == AF_INET) return ntohs(reinterpret_cast<sockaddr_in*>(&bound)->sin_port);
  if (bound.ss_family == AF_INET6) return ntohs(reinterpret_cast<sockaddr_in6*>(&bound)->sin6_port);
  return 0;
}

// The client's address as text ("127.0.0.1", "::1"; an IPv4-mapped IPv6 one as IPv4) and port.
std::pair<std::string, int> PeerOf(const sockaddr_storage& peer) {
  char text[INET6_ADDRSTRLEN] = "";
  int port = 0;
  if (peer.ss_family == AF_INET) {
    const auto& v4 = reinterpret_cast<const sockaddr_in&>(peer);
    inet_ntop(AF_INET, &v4.sin_addr, text, sizeof(text));
    port = ntohs(v4.sin_port);
  } else if (peer.ss_family == AF_INET6) {
    const auto& v6 = reinterpret_cast<const sockaddr_in6&>(peer);
    if (IN6_IS_ADDR_V4MAPPED(&v6.sin6_addr)) {
      inet_ntop(AF_INET, &v6.sin6_addr.s6_addr[12], text, sizeof(text));
    } else {
      inet_ntop(AF_INET6, &v6.sin6_addr, text, sizeof(text));
    }
    port = ntohs(v6.sin6_port);
  }
  return {std::string(text), port};
}

// A Content-Length a handler gave (what a GET would send, in its answer to HEAD).
std::optional<uint64_t> DeclaredLength(const HttpHeaders& headers) {
  for (const auto& [name, value] : headers) {
    if (!absl::EqualsIgnoreCase(name, "content-length")) continue;
    if (value.empty() || value.size() > 19) return std::nullopt;
    uint64_t length = 0;
    for (char c : value) {
      if (c < '0' || c > '9') return std::nullopt;
      length = length * 10 + static_cast<uint64_t>(c - '0');
    }
    return length;
  }
  return std::nullopt;
}

}  // namespace

// What the loop thread and every ResponseWriter share: the connections whose writers queued
// work, the eventfd that wakes the loop, the stop flag and the counters. Outlives the server
// while writers are held (a writer of a stopped server finds `stopping` and queues nothing).
// Thread-safe.
class ProxyHub {
 public:
  explicit ProxyHub(int wake_fd) : wake_fd_(wake_fd) {}
  ~ProxyHub() { close(wake_fd_); }
  ProxyHub(const ProxyHub&) = delete;
  ProxyHub& operator=(const ProxyHub&) = delete;

  int wake_fd() const { return wake_fd_; }

  void Wake() const {
    const uint64_t one = 1;
    while (write(wake_fd_, &one, sizeof(one)) < 0 && errno == EINTR) {
    }
  }

  // Tells the loop that `connection`'s writer has work; one wake-up per batch.
  void Schedule(uint64_t connection) ABSL_LOCKS_EXCLUDED(mu_) {
    bool wake = false;
    {
      absl::MutexLock lock(&mu_);
      if (stopping_) return;
      wake = ready_.empty();
      ready_.push_back(connection);
    }
    if (wake) Wake();
  }

  std::vector<uint64_t> TakeReady() ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    return std::exchange(ready_, {});
  }

  void Stop() ABSL_LOCKS_EXCLUDED(mu_) {
    {
      absl::MutexLock lock(&mu_);
      stopping_ = true;
      ready_.clear();
    }
    Wake();
  }

  bool stopping() const ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    return stopping_;
  }

  template <typename Update>
  void UpdateStats(Update&& update) ABSL_LOCKS_EXCLUDED(stats_mu_) {
    absl::MutexLock lock(&stats_mu_);
    update(stats_);
  }

  HttpProxyServerStats Stats() const ABSL_LOCKS_EXCLUDED(stats_mu_) {
    absl::MutexLock lock(&stats_mu_);
    return stats_;
  }

  bool AwaitStats(Clock& clock, const std::function<bool(const HttpProxyServerStats&)>& condition,
                  absl::Time deadline) const ABSL_LOCKS_EXCLUDED(stats_mu_) {
    absl::MutexLock lock(&stats_mu_);
    const HttpProxyServerStats* stats = &stats_;
    const auto holds = [&condition, stats] { return condition(*stats); };
    return clock.AwaitWithDeadline(stats_mu_, absl::Condition(&holds), deadline);
  }

 private:
  const int wake_fd_;
  mutable absl::Mutex mu_;
  std::vector<uint64_t> ready_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  mutable absl::Mutex stats_mu_;
  HttpProxyServerStats stats_ ABSL_GUARDED_BY(stats_mu_);
};

// --- ResponseWriter ------------------------------------------------------------------------

ResponseWriter::ResponseWriter(std::shared_ptr<ProxyHub> hub, uint64_t connection,
                               std::string request_id, size_t buffer_limit)
    : hub_(std::move(hub)),
      connection_(connection),
      request_id_(std::move(request_id)),
      buffer_limit_(buffer_limit) {}

absl::Status ResponseWriter::Refusal(std::string_view call) const {
  if (finished_) {
    return absl::FailedPreconditionError(
        absl::StrCat(ToAbsl(call), " after the response to request ", request_id_, " finished"));
  }
  if (ended_) {
    return absl::CancelledError(absl::StrCat(
        ToAbsl(call), " on request ", request_id_,
        ": the exchange has ended (the client went away, it timed out or the server stopped)"));
  }
  return absl::FailedPreconditionError(
      absl::StrCat(ToAbsl(call), " before Start on request ", request_id_));
}

bool ResponseWriter::MarkScheduled() {
  if (scheduled_) return false;
  scheduled_ = true;
  return true;
}

size_t ResponseWriter::BufferedLocked() const { return pending_.body.size() + unsent_; }

absl::Status ResponseWriter::Start(int status, HttpHeaders headers, ResponseMode mode,
                                   std::string body) {
  TESSERA_RETURN_IF_ERROR(ValidateResponseHead(status, headers));
  bool wake = false;
  {
    absl::MutexLock lock(&mu_);
    if (started_ || finished_) {
      return absl::FailedPreconditionError(
          absl::StrCat("Start on request ", request_id_, ": the response has ",
                       started_ ? "started" : "failed", " already"));
    }
    if (ended_) return Refusal("Start");
    started_ = true;
    finished_ = mode == ResponseMode::kComplete;
    pending_.head = PendingHead{status, std::move(headers), mode};
    pending_.body = std::move(body);  // nothing is queued before Start
    pending_.finish = finished_;
    wake = MarkScheduled();
  }
  if (wake) hub_->Schedule(connection_);
  return absl::OkStatus();
}

absl::Status ResponseWriter::Write(std::string_view bytes) {
  bool wake = false;
  {
    absl::MutexLock lock(&mu_);
    if (ended_ || !started_ || finished_) return Refusal("Write");
    if (bytes.empty()) return absl::OkStatus();
    pending_.body.append(bytes.data(), bytes.size());
    wake = MarkScheduled();
  }
  if (wake) hub_->Schedule(connection_);
  return absl::OkStatus();
}

absl::Status ResponseWriter::Finish() {
  bool wake = false;
  {
    absl::MutexLock lock(&mu_);
    if (ended_ || !started_ || finished_) return Refusal("Finish");
    finished_ = true;
    pending_.finish = true;
    wake = MarkScheduled();
  }
  if (wake) hub_->Schedule(connection_);
  return absl::OkStatus();
}

void ResponseWriter::Fail() {
  bool wake = false;
  {
    absl::MutexLock lock(&mu_);
    if (ended_ || finished_) return;
    finished_ = true;
    pending_.fail = true;
    wake = MarkScheduled();
  }
  if (wake) hub_->Schedule(connection_);
}

bool ResponseWriter::started() const {
  absl::MutexLock lock(&mu_);
  return started_;
}

bool ResponseWriter::WouldBuffer() const {
  absl::MutexLock lock(&mu_);
  return !ended_ && BufferedLocked() > buffer_limit_;
}

void ResponseWriter::OnWritable(std::function<void()> callback) {
  {
    absl::MutexLock lock(&mu_);
    if (!ended_ && BufferedLocked() > buffer_limit_) {
      writable_callbacks_.push_back(std::move(callback));
      return;
    }
  }
  callback();
}

void ResponseWriter::OnClientGone(std::function<void()> callback) {
  {
    absl::MutexLock lock(&mu_);
    if (!gone_) {
      gone_callbacks_.push_back(std::move(callback));
      return;
    }
  }
  callback();
}

ResponseWriter::Ops ResponseWriter::TakeOps() {
  absl::MutexLock lock(&mu_);
  scheduled_ = false;
  return std::exchange(pending_, Ops());
}

ResponseWriter::Callbacks ResponseWriter::End() {
  absl::MutexLock lock(&mu_);
  if (ended_) return {};
  ended_ = true;
  pending_ = Ops();
  Callbacks due = std::exchange(writable_callbacks_, {});
  if (!finished_) {
    gone_ = true;
    for (auto& callback : gone_callbacks_) due.push_back(std::move(callback));
  }
  gone_callbacks_.clear();
  return due;
}

ResponseWriter::Callbacks ResponseWriter::SetUnsent(size_t bytes) {
  absl::MutexLock lock(&mu_);
  unsent_ = bytes;
  if (writable_callbacks_.empty() || BufferedLocked() > buffer_limit_ / 2) return {};
  return std::exchange(writable_callbacks_, {});
}

// --- The loop ------------------------------------------------------------------------------

// The loop thread's state and steps; touched by that thread only (and by Stop's thread once the
// loop has returned).
//
// A connection's top-level step (an epoll event, a writer's work, a deadline) changes its state
// and then Settle()s it: flushes output, takes up pipelined input, closes it when its `ending`
// says so (never in the middle of a step, so no step touches a closed connection), or else
// sets its epoll interest and deadline from its state.
class ProxyLoop {
 public:
  ProxyLoop(const HttpProxyServerOptions& options, ProxyHandler handler,
            std::shared_ptr<ProxyHub> hub, int listener, int epoll_fd)
      : options_(options),
        clock_(options.clock),
        handler_(std::move(handler)),
        hub_(std::move(hub)),
        listener_(listener),
        epoll_fd_(epoll_fd),
        limits_{options.max_head_bytes, options.max_header_count, options.max_body_bytes},
        read_buffer_(kReadBufferBytes, '\0') {}

  // Until the hub says stop.
  void Run();
  // Closes every connection (ending its exchange) and runs the callbacks that causes.
  void CloseAll();

 private:
  using Callbacks = ResponseWriter::Callbacks;

  // The request being answered on a connection.
  struct Exchange {
    std::shared_ptr<ResponseWriter> writer;
    bool head_only = false;  // a HEAD request: the response has no body
    bool http10 = false;
    bool keep_alive = true;    // the connection stays open after the response
    bool head_queued = false;  // response bytes are on their way: a failure now resets
    BodyFraming framing = BodyFraming::kNone;  // of the body bytes actually sent
  };

  enum class Phase {
    kOpen,               // reading requests, answering them
    kClosingAfterFlush,  // the last response is going out
    kLingering,          // written and shut down; what the client still sends is dropped
  };
  enum class Ending { kNone, kClose, kReset };
  // Which of a connection's timers is next.
  enum class Due { kNone, kLinger, kWriteStall, kRequestTimeout, kHeadTimeout, kBodyStall, kIdle };

  struct Connection {
    explicit Connection(const HttpStreamLimits& limits) : parser(limits) {}
    uint64_t id = 0;
    int fd = -1;
    std::string address;
    int port = 0;
    HttpRequestParser parser;
    std::string pipelined;  // read past the request being answered: parsed after it
    std::deque<std::string> out;
    size_t out_offset = 0;  // already sent of out.front()
    size_t out_bytes = 0;   // unsent, in all of `out`
    std::optional<Exchange> exchange;
    // The request whose head arrived (its body may still be arriving).
    std::string request_id;
    absl::Time request_deadline = absl::InfiniteFuture();
    Phase phase = Phase::kOpen;
    Ending ending = Ending::kNone;
    absl::Time idle_since;    // accepted, or the last response finished
    absl::Time head_started;  // the first byte of the head being read
    absl::Time last_read;
    absl::Time last_write;  // bytes went out, or output began to wait
    absl::Time linger_until;
    size_t lingered = 0;
    absl::Time deadline = absl::InfiniteFuture();  // as in deadlines_
    uint32_t events = 0;                           // the epoll interest
  };

  Connection* Find(uint64_t id);
  void Watch(int fd, uint64_t id, uint32_t events, int op) const;
  int WaitMilliseconds() const;

  void AcceptAll();
  void Refuse(int fd);
  void ResumeAccepting();
  bool OnWake();  // false when the server stops
  void OnEvent(uint64_t id, uint32_t events);
  void ExpireDeadlines();
  void OnDeadline(Connection& c, Due due);

  bool ReadingAllowed(const Connection& c) const;
  void ReadInput(Connection& c);
  void ProcessInput(Connection& c, std::string_view bytes);
  void OnHead(Connection& c);
  void Dispatch(Connection& c, HttpRequestMessage message);
  void Drain(Connection& c);

  void ApplyWriterOps(Connection& c);
  void QueueHead(Connection& c, ResponseWriter::PendingHead head, std::string body);
  void QueueBody(Connection& c, std::string bytes);
  void FinishExchange(Connection& c);
  void FailExchange(Connection& c);
  void TimeOut(Connection& c);
  void Answer(Connection& c, int status, std::string message);
  void Append(Connection& c, std::string bytes);
  void Flush(Connection& c);
  void DropSent(Connection& c, size_t sent);

  std::pair<absl::Time, Due> NextDue(const Connection& c) const;
  void Settle(uint64_t id);
  void Refresh(Connection& c);
  void Close(uint64_t id, bool reset);

  HttpHeaders WithServerHeaders(HttpHeaders headers, const std::string& request_id) const;
  std::string TimeoutMessage(const std::string& request_id) const;
  std::string NewRequestId();
  void CountStatus(int status);
  void Defer(Callbacks callbacks);
  void RunDeferred();

  const HttpProxyServerOptions& options_;
  Clock* const clock_;
  const ProxyHandler handler_;
  const std::shared_ptr<ProxyHub> hub_;
  const int listener_;
  const int epoll_fd_;
  const HttpStreamLimits limits_;
  uint64_t next_id_ = kFirstConnectionId;
  absl::flat_hash_map<uint64_t, std::unique_ptr<Connection>> connections_;
  std::set<std::pair<absl::Time, uint64_t>> deadlines_;  // soonest first
  absl::Time accept_paused_until_ = absl::InfinitePast();
  std::string read_buffer_;
  Callbacks deferred_;  // run once the step that produced them is over
  absl::BitGen bitgen_;
};

ProxyLoop::Connection* ProxyLoop::Find(uint64_t id) {
  auto it = connections_.find(id);
  return it == connections_.end() ? nullptr : it->second.get();
}

void ProxyLoop::Watch(int fd, uint64_t id, uint32_t events, int op) const {
  epoll_event event{};
  event.events = events;
  event.data.u64 = id;
  (void)epoll_ctl(epoll_fd_, op, fd, &event);
}

int ProxyLoop::WaitMilliseconds() const {
  absl::Time next = deadlines_.empty() ? absl::InfiniteFuture() : deadlines_.begin()->first;
  if (accept_paused_until_ != absl::InfinitePast()) next = std::min(next, accept_paused_until_);
  if (next == absl::InfiniteFuture()) return -1;
  const absl::Duration left = std::max(absl::ZeroDuration(), next - clock_->Now());
  return static_cast<int>(std::min<int64_t>(
      absl::ToInt64Milliseconds(absl::Ceil(left, absl::Milliseconds(1))), 3600 * 1000));
}

void ProxyLoop::Run() {
  Watch(listener_, kListenerId, EPOLLIN, EPOLL_CTL_ADD);
  Watch(hub_->wake_fd(), kWakeId, EPOLLIN, EPOLL_CTL_ADD);
  epoll_event events[kEpollBatch];
  while (true) {
    const int n = epoll_wait(epoll_fd_, events, kEpollBatch, WaitMilliseconds());
    if (n < 0 && errno != EINTR) return;  // cannot wait at all (never with valid descriptors)
    for (int i = 0; i < n; ++i) {
      const uint64_t id = events[i].data.u64;
      if (id == kListenerId) {
        AcceptAll();
      } else if (id == kWakeId) {
        if (!OnWake()) {
          RunDeferred();
          return;
        }
      } else {
        OnEvent(id, events[i].events);
      }
    }
    ResumeAccepting();
    ExpireDeadlines();
    RunDeferred();
  }
}

void ProxyLoop::CloseAll() {
  std::vector<uint64_t> ids;
  ids.reserve(connections_.size());
  for (const auto& [id, connection] : connections_) ids.push_back(id);
  for (const uint64_t id : ids) Close(id, /*reset=*/false);
  RunDeferred();
}

void ProxyLoop::AcceptAll() {
  while (true) {
    sockaddr_storage peer{};
    socklen_t size = sizeof(peer);
    const int fd =
        accept4(listener_, reinterpret_cast<sockaddr*>(&peer), &size, SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (fd < 0) {
      if (errno == EINTR || errno == ECONNABORTED) continue;
      if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
        // The listener would stay readable and spin the loop: pause it.
        accept_paused_until_ = clock_->Now() + kAcceptPause;
        Watch(listener_, kListenerId, 0, EPOLL_CTL_MOD);
      }
      return;  // EAGAIN: every waiting connection is taken
    }
    if (connections_.size() >= static_cast<size_t>(options_.max_connections)) {
      Refuse(fd);
      continue;
    }
    const int on = 1;  // streamed chunks go out as they are written
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &on, sizeof(on));
    auto connection = std::make_unique<Connection>(limits_);
    Connection& c = *connection;
    c.id = next_id_++;
    c.fd = fd;
    std::tie(c.address, c.port) = PeerOf(peer);
    c.idle_since = clock_->Now();
    c.events = EPOLLIN;
    connections_.emplace(c.id, std::move(connection));
    Watch(fd, c.id, EPOLLIN, EPOLL_CTL_ADD);
    Refresh(c);
    const auto open = static_cast<int64_t>(connections_.size());
    hub_->UpdateStats([open](HttpProxyServerStats& stats) {
      ++stats.connections_accepted;
      stats.connections_open = open;
    });
  }
}

void ProxyLoop::Refuse(int fd) {
  // What the client sent already is read first, so that closing does not reset the connection
  // under the reply; one non-blocking send (a fresh socket's buffer takes a reply this small).
  for (int i = 0; i < 4 && recv(fd, read_buffer_.data(), read_buffer_.size(), MSG_DONTWAIT) > 0;
       ++i) {
  }
  const std::string body =
      absl::StrCat("the server has ", options_.max_connections, " connections open");
  const std::string reply =
      absl::StrCat(SerializeResponseHead(503, WithServerHeaders({{"content-type", kTextPlain}}, ""),
                                         BodyFraming::kContentLength, body.size(), false),
                   body);
  (void)send(fd, reply.data(), reply.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
  shutdown(fd, SHUT_WR);
  close(fd);
  CountStatus(503);
  hub_->UpdateStats([](HttpProxyServerStats& stats) { ++stats.connections_refused; });
}

void ProxyLoop::ResumeAccepting() {
  if (accept_paused_until_ == absl::InfinitePast() || clock_->Now() < accept_paused_until_) return;
  accept_paused_until_ = absl::InfinitePast();
  Watch(listener_, kListenerId, EPOLLIN, EPOLL_CTL_MOD);
}

bool ProxyLoop::OnWake() {
  uint64_t count = 0;
  while (read(hub_->wake_fd(), &count, sizeof(count)) < 0 && errno == EINTR) {
  }
  if (hub_->stopping()) return false;
  for (const uint64_t id : hub_->TakeReady()) {
    Connection* c = Find(id);
    if (c == nullptr) continue;  // closed since: its writer was ended then
    ApplyWriterOps(*c);
    Settle(id);
  }
  return true;
}

void ProxyLoop::OnEvent(uint64_t id, uint32_t events) {
  Connection* c = Find(id);
  if (c == nullptr) return;
  if ((events & EPOLLERR) != 0) {
    c->ending = Ending::kClose;  // reset by the client, or a write failed
  } else if (c->phase == Phase::kLingering) {
    Drain(*c);
  } else if ((events & EPOLLIN) != 0 && ReadingAllowed(*c)) {
    ReadInput(*c);
  } else if ((events & (EPOLLRDHUP | EPOLLHUP)) != 0) {
    c->ending = Ending::kClose;  // the client closed its side: it is gone
  }
  Settle(id);
}

void ProxyLoop::ExpireDeadlines() {
  const absl::Time now = clock_->Now();
  std::vector<uint64_t> due;
  for (auto it = deadlines_.begin(); it != deadlines_.end() && it->first <= now; ++it) {
    due.push_back(it->second);
  }
  // Each connection once per pass: every step below changes its state, and what falls due
  // because of that is seen on the next pass.
  for (const uint64_t id : due) {
    Connection* c = Find(id);
    if (c == nullptr) continue;
    const auto [when, what] = NextDue(*c);
    if (when <= now) OnDeadline(*c, what);
    Settle(id);
  }
}

void ProxyLoop::OnDeadline(Connection& c, Due due) {
  switch (due) {
    case Due::kNone: return;
    case Due::kLinger:
    case Due::kIdle: c.ending = Ending::kClose; return;
    case Due::kWriteStall: c.ending = Ending::kReset; return;  // it takes nothing: gone
    case Due::kHeadTimeout:
      Answer(c, 408,
             absl::StrCat("the request head did not arrive within ",
                          absl::ToDoubleSeconds(options_.head_read_timeout), "s"));
      return;
    case Due::kBodyStall:
      Answer(c, 408,
             absl::StrCat("the request body stopped arriving for ",
                          absl::ToDoubleSeconds(options_.keep_alive_timeout), "s"));
      return;
    case Due::kRequestTimeout:
      if (c.exchange.has_value()) {
        TimeOut(c);
      } else {
        Answer(c, 408, TimeoutMessage(c.request_id));  // its body was still arriving
      }
      return;
  }
}

bool ProxyLoop::ReadingAllowed(const Connection& c) const {
  return !c.exchange.has_value() && c.phase == Phase::kOpen && c.ending == Ending::kNone &&
         c.pipelined.empty() && c.out_bytes < options_.max_buffered_bytes;
}

void ProxyLoop::ReadInput(Connection& c) {
  for (int reads = 0; reads < kMaxReadsPerEvent && ReadingAllowed(c); ++reads) {
    const ssize_t n = recv(c.fd, read_buffer_.data(), read_buffer_.size(), 0);
    if (n > 0) {
      c.last_read = clock_->Now();
      ProcessInput(c, std::string_view(read_buffer_.data(), static_cast<size_t>(n)));
      // Counted after the bytes are taken in, so a test that waits for the count knows the
      // loop has seen them.
      hub_->UpdateStats([n](HttpProxyServerStats& stats) { stats.bytes_received += n; });
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
    c.ending = Ending::kClose;  // the client closed (or broke): a partial request is dropped
    return;
  }
}

void ProxyLoop::ProcessInput(Connection& c, std::string_view bytes) {
  while (!bytes.empty() && !c.exchange.has_value() && c.phase == Phase::kOpen &&
         c.ending == Ending::kNone) {
    const bool was_idle = c.parser.idle();
    const bool had_head = c.parser.head_complete();
    bytes.remove_prefix(c.parser.Feed(bytes));
    if (was_idle && !c.parser.idle()) c.head_started = clock_->Now();
    if (c.parser.failed()) {
      // Where the next request would start is unknown: answer and close.
      Answer(c, c.parser.error().status, c.parser.error().reason);
      return;
    }
    if (!had_head && c.parser.head_complete()) OnHead(c);
    if (c.parser.TakeContinue()) Append(c, std::string(kContinueResponse));
    if (c.parser.done()) Dispatch(c, c.parser.TakeRequest());
  }
  if (c.phase == Phase::kOpen && c.ending == Ending::kNone) {
    c.pipelined.append(bytes.data(), bytes.size());
  }
}

void ProxyLoop::OnHead(Connection& c) {
  const std::optional<std::string_view> id = c.parser.head().Header("x-request-id");
  c.request_id = id.has_value() && !id->empty() ? std::string(*id) : NewRequestId();
  c.request_deadline = options_.request_timeout.has_value()
                           ? clock_->Now() + *options_.request_timeout
                           : absl::InfiniteFuture();
}

void ProxyLoop::Dispatch(Connection& c, HttpRequestMessage message) {
  Exchange exchange;
  exchange.head_only = message.head.method == "HEAD";
  exchange.http10 = message.head.minor_version == 0;
  exchange.keep_alive = WantsKeepAlive(message.head);
  exchange.writer = std::shared_ptr<ResponseWriter>(
      new ResponseWriter(hub_, c.id, c.request_id, options_.max_buffered_bytes));
  std::shared_ptr<ResponseWriter> writer = exchange.writer;
  c.exchange = std::move(exchange);
  hub_->UpdateStats([](HttpProxyServerStats& stats) { ++stats.requests; });
  ProxyRequest request;
  request.head = std::move(message.head);
  request.body = std::move(message.body);
  request.request_id = c.request_id;
  request.client_address = c.address;
  request.client_port = c.port;
  handler_(std::move(request), std::move(writer));
}

void ProxyLoop::Drain(Connection& c) {
  while (true) {
    const ssize_t n = recv(c.fd, read_buffer_.data(), read_buffer_.size(), 0);
    if (n > 0) {
      c.lingered += static_cast<size_t>(n);
      if (c.lingered <= kMaxLingerBytes) continue;
    } else if (n < 0 && errno == EINTR) {
      continue;
    } else if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      return;
    }
    c.ending = Ending::kClose;  // the client closed (or sent too much to wait for)
    return;
  }
}

void ProxyLoop::ApplyWriterOps(Connection& c) {
  if (!c.exchange.has_value() || c.ending != Ending::kNone) return;
  ResponseWriter::Ops ops = c.exchange->writer->TakeOps();
  if (ops.head.has_value()) {
    QueueHead(c, std::move(*ops.head), std::move(ops.body));
  } else {
    QueueBody(c, std::move(ops.body));
  }
  if (ops.fail) {
    FailExchange(c);
  } else if (ops.finish) {
    FinishExchange(c);
  }
}

void ProxyLoop::QueueHead(Connection& c, ResponseWriter::PendingHead head, std::string body) {
  Exchange& exchange = *c.exchange;
  const bool bodiless_status = head.status == 204 || head.status == 304;
  const bool streaming = head.mode == ResponseMode::kStreaming;
  BodyFraming framing = BodyFraming::kContentLength;
  uint64_t length = body.size();
  if (bodiless_status) {
    framing = BodyFraming::kNone;
  } else if (streaming) {
    framing = exchange.http10 ? BodyFraming::kUntilClose : BodyFraming::kChunked;
  } else if (exchange.head_only) {
    length = DeclaredLength(head.headers).value_or(length);
  }
  exchange.keep_alive = exchange.keep_alive && framing != BodyFraming::kUntilClose;
  exchange.framing = exchange.head_only || bodiless_status ? BodyFraming::kNone : framing;
  exchange.head_queued = true;
  Append(c, SerializeResponseHead(head.status,
                                  WithServerHeaders(std::move(head.headers), c.request_id), framing,
                                  length, exchange.keep_alive));
  CountStatus(head.status);
  if (streaming) {
    QueueBody(c, std::move(body));
  } else if (exchange.framing != BodyFraming::kNone) {
    Append(c, std::move(body));
  }
}

void ProxyLoop::QueueBody(Connection& c, std::string bytes) {
  if (bytes.empty()) return;
  switch (c.exchange->framing) {
    case BodyFraming::kChunked:
      Append(c, ChunkSizeLine(bytes.size()));
      Append(c, std::move(bytes));
      Append(c, "\r\n");
      return;
    case BodyFraming::kUntilClose: Append(c, std::move(bytes)); return;
    case BodyFraming::kNone:
    case BodyFraming::kContentLength: return;  // HEAD, 204, 304: the body is not sent
  }
}

void ProxyLoop::FinishExchange(Connection& c) {
  if (c.exchange->framing == BodyFraming::kChunked) Append(c, std::string(kLastChunk));
  const bool keep_alive = c.exchange->keep_alive;
  Defer(c.exchange->writer->End());
  c.exchange.reset();
  c.request_id.clear();
  c.request_deadline = absl::InfiniteFuture();
  c.idle_since = clock_->Now();
  if (!keep_alive) c.phase = Phase::kClosingAfterFlush;
  // Counted once the connection's state says so, so that a test waiting for the count may move
  // a fake clock past the idle timeout.
  hub_->UpdateStats([](HttpProxyServerStats& stats) { ++stats.responses_completed; });
}

void ProxyLoop::FailExchange(Connection& c) {
  if (c.exchange->head_queued) {
    c.ending = Ending::kReset;  // a client must not take a cut response for a whole one
    return;
  }
  Answer(c, 500, "Internal Server Error");
  Defer(c.exchange->writer->End());
  c.exchange.reset();
  c.request_deadline = absl::InfiniteFuture();
}

void ProxyLoop::TimeOut(Connection& c) {
  ApplyWriterOps(c);  // a response finished just now still goes out whole
  if (!c.exchange.has_value() || c.ending != Ending::kNone) return;
  Defer(c.exchange->writer->End());  // its OnClientGone callbacks cancel the request
  if (c.exchange->head_queued) {
    c.ending = Ending::kReset;
    return;
  }
  Answer(c, 408, TimeoutMessage(c.request_id));
  c.exchange.reset();
  c.request_deadline = absl::InfiniteFuture();
}

void ProxyLoop::Answer(Connection& c, int status, std::string message) {
  const bool with_body = !(c.exchange.has_value() && c.exchange->head_only);
  Append(c, SerializeResponseHead(
                status, WithServerHeaders({{"content-type", kTextPlain}}, c.request_id),
                BodyFraming::kContentLength, message.size(), /*keep_alive=*/false));
  if (with_body) Append(c, std::move(message));
  CountStatus(status);
  c.phase = Phase::kClosingAfterFlush;
}

void ProxyLoop::Append(Connection& c, std::string bytes) {
  if (bytes.empty()) return;
  if (c.out_bytes == 0) c.last_write = clock_->Now();  // a reader taking nothing is timed from now
  c.out_bytes += bytes.size();
  c.out.push_back(std::move(bytes));
}

void ProxyLoop::Flush(Connection& c) {
  while (c.out_bytes > 0) {
    iovec pieces[kMaxIovecs];
    int count = 0;
    size_t skip = c.out_offset;
    for (auto it = c.out.begin(); it != c.out.end() && count < kMaxIovecs; ++it, skip = 0) {
      pieces[count].iov_base = it->data() + skip;
      pieces[count].iov_len = it->size() - skip;
      ++count;
    }
    msghdr message{};
    message.msg_iov = pieces;
    message.msg_iovlen = static_cast<size_t>(count);
    const ssize_t n = sendmsg(c.fd, &message, MSG_NOSIGNAL);
    if (n > 0) {
      DropSent(c, static_cast<size_t>(n));
      c.last_write = clock_->Now();
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;  // EPOLLOUT brings us back
    c.ending = Ending::kClose;  // EPIPE, ECONNRESET: the client is gone
    return;
  }
}

void ProxyLoop::DropSent(Connection& c, size_t sent) {
  c.out_bytes -= sent;
  while (sent > 0) {
    const size_t left_in_front = c.out.front().size() - c.out_offset;
    if (sent < left_in_front) {
      c.out_offset += sent;
      return;
    }
    sent -= left_in_front;
    c.out.pop_front();
    c.out_offset = 0;
  }
}

std::pair<absl::Time, ProxyLoop::Due> ProxyLoop::NextDue(const Connection& c) const {
  if (c.phase == Phase::kLingering) return {c.linger_until, Due::kLinger};
  std::pair<absl::Time, Due> next{absl::InfiniteFuture(), Due::kNone};
  const auto consider = [&next](absl::Time when, Due due) {
    if (when < next.first) next = {when, due};
  };
  const absl::Duration keep_alive = options_.keep_alive_timeout;
  if (c.out_bytes > 0) consider(c.last_write + keep_alive, Due::kWriteStall);
  if (c.exchange.has_value()) {
    consider(c.request_deadline, Due::kRequestTimeout);
  } else if (c.phase != Phase::kOpen) {
    // Closing: only the write stall.
  } else if (c.parser.reading_head()) {
    consider(c.head_started + options_.head_read_timeout, Due::kHeadTimeout);
  } else if (c.parser.head_complete()) {
    consider(c.request_deadline, Due::kRequestTimeout);
    consider(c.last_read + keep_alive, Due::kBodyStall);
  } else if (c.out_bytes == 0 && c.pipelined.empty()) {
    consider(c.idle_since + keep_alive, Due::kIdle);
  }
  return next;
}

void ProxyLoop::Settle(uint64_t id) {
  Connection* c = Find(id);
  if (c == nullptr) return;
  const auto live = [c] { return c->ending == Ending::kNone && c->phase != Phase::kLingering; };
  if (live() && c->out_bytes > 0) Flush(*c);
  if (live() && c->phase == Phase::kOpen && !c->exchange.has_value() && !c->pipelined.empty() &&
      c->out_bytes < options_.max_buffered_bytes) {
    // The next pipelined request, now that the one before it is answered.
    const std::string pending = std::exchange(c->pipelined, std::string());
    ProcessInput(*c, pending);
    if (live() && c->out_bytes > 0) Flush(*c);
  }
  if (live() && c->phase == Phase::kClosingAfterFlush && c->out_bytes == 0) {
    // Our side is done: the client reads to the end, then closes.
    shutdown(c->fd, SHUT_WR);
    c->phase = Phase::kLingering;
    c->linger_until = clock_->Now() + kLinger;
  }
  if (c->ending != Ending::kNone) {
    Close(id, c->ending == Ending::kReset);
    return;
  }
  Refresh(*c);
}

void ProxyLoop::Refresh(Connection& c) {
  uint32_t events = 0;
  if (c.phase == Phase::kLingering) {
    events = EPOLLIN;
  } else {
    // While a request is answered only the client's leaving is watched for (EPOLLRDHUP);
    // pipelined bytes wait in the socket.
    if (c.exchange.has_value()) {
      events = EPOLLRDHUP;
    } else if (ReadingAllowed(c)) {
      events = EPOLLIN;
    }
    if (c.out_bytes > 0) events |= EPOLLOUT;
  }
  if (events != c.events) {
    Watch(c.fd, c.id, events, EPOLL_CTL_MOD);
    c.events = events;
  }
  const absl::Time deadline = NextDue(c).first;
  if (deadline != c.deadline) {
    if (c.deadline != absl::InfiniteFuture()) deadlines_.erase({c.deadline, c.id});
    c.deadline = deadline;
    if (deadline != absl::InfiniteFuture()) deadlines_.insert({deadline, c.id});
  }
  if (c.exchange.has_value()) Defer(c.exchange->writer->SetUnsent(c.out_bytes));
}

void ProxyLoop::Close(uint64_t id, bool reset) {
  auto it = connections_.find(id);
  if (it == connections_.end()) return;
  Connection& c = *it->second;
  if (c.exchange.has_value()) Defer(c.exchange->writer->End());
  (void)epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, c.fd, nullptr);
  if (reset) {
    // A reset, not an orderly end: the client must not take a cut response for a whole one.
    const linger reset_at_close{1, 0};
    setsockopt(c.fd, SOL_SOCKET, SO_LINGER, &reset_at_close, sizeof(reset_at_close));
  }
  close(c.fd);
  if (c.deadline != absl::InfiniteFuture()) deadlines_.erase({c.deadline, id});
  connections_.erase(it);
  const auto open = static_cast<int64_t>(connections_.size());
  hub_->UpdateStats([open](HttpProxyServerStats& stats) { stats.connections_open = open; });
}

HttpHeaders ProxyLoop::WithServerHeaders(HttpHeaders headers, const std::string& request_id) const {
  bool has_id = false;
  bool has_date = false;
  for (const auto& [name, value] : headers) {
    has_id = has_id || absl::EqualsIgnoreCase(name, "x-request-id");
    has_date = has_date || absl::EqualsIgnoreCase(name, "date");
  }
  if (!has_id && !request_id.empty()) headers.emplace_back("x-request-id", request_id);
  if (!has_date) {
    headers.emplace_back(
        "date", absl::FormatTime("%a, %d %b %Y %H:%M:%S GMT", clock_->Now(), absl::UTCTimeZone()));
  }
  return headers;
}

std::string ProxyLoop::TimeoutMessage(const std::string& request_id) const {
  // Ray's words, so clients that match on them keep working.
  return absl::StrCat("Request ", request_id, " timed out after ",
                      PythonFloatText(absl::ToDoubleSeconds(
                          options_.request_timeout.value_or(absl::ZeroDuration()))),
                      "s.");
}

std::string ProxyLoop::NewRequestId() {
  return absl::StrCat(absl::Hex(absl::Uniform<uint64_t>(bitgen_), absl::kZeroPad16),
                      absl::Hex(absl::Uniform<uint64_t>(bitgen_), absl::kZeroPad16));
}

void ProxyLoop::CountStatus(int status) {
  hub_->UpdateStats([status](HttpProxyServerStats& stats) { ++stats.responses_by_status[status]; });
}

void ProxyLoop::Defer(Callbacks callbacks) {
  for (auto& callback : callbacks) deferred_.push_back(std::move(callback));
}

void ProxyLoop::RunDeferred() {
  Callbacks due = std::exchange(deferred_, {});
  for (auto& callback : due) {
    if (callback) callback();
  }
}

// --- HttpProxyServer -----------------------------------------------------------------------

absl::StatusOr<std::unique_ptr<HttpProxyServer>> HttpProxyServer::Start(
    HttpProxyServerOptions options, ProxyHandler handler) {
  TESSERA_RETURN_IF_ERROR(ValidateOptions(options));
  if (handler == nullptr) return absl::InvalidArgumentError("the proxy server needs a handler");
  if (options.clock == nullptr) options.clock = Clock::Real();
  TESSERA_ASSIGN_OR_RETURN(const int listener, Listen(options.host, options.port));
  const int epoll_fd = epoll_create1(EPOLL_CLOEXEC);
  const int wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (epoll_fd < 0 || wake_fd < 0) {
    const int error = errno;
    if (epoll_fd >= 0) close(epoll_fd);
    if (wake_fd >= 0) close(wake_fd);
    close(listener);
    return absl::UnavailableError(SystemError("cannot create the event loop", error));
  }
  const int port = BoundPort(listener);
  std::unique_ptr<HttpProxyServer> server(new HttpProxyServer(
      std::move(options), listener, port, epoll_fd, std::make_shared<ProxyHub>(wake_fd)));
  server->loop_ = std::make_unique<ProxyLoop>(server->options_, std::move(handler), server->hub_,
                                              listener, epoll_fd);
  server->thread_ = std::thread([loop = server->loop_.get()] { loop->Run(); });
  return server;
}

HttpProxyServer::HttpProxyServer(HttpProxyServerOptions options, int listener, int port,
                                 int epoll_fd, std::shared_ptr<ProxyHub> hub)
    : options_(std::move(options)),
      listener_(listener),
      port_(port),
      epoll_fd_(epoll_fd),
      hub_(std::move(hub)) {}

HttpProxyServer::~HttpProxyServer() { Stop(); }

HttpProxyServerStats HttpProxyServer::stats() const { return hub_->Stats(); }

bool HttpProxyServer::AwaitStats(const std::function<bool(const HttpProxyServerStats&)>& condition,
                                 absl::Duration timeout) const {
  return hub_->AwaitStats(*options_.clock, condition, options_.clock->Now() + timeout);
}

void HttpProxyServer::Wake() { hub_->Wake(); }

void HttpProxyServer::Stop() {
  absl::MutexLock lock(&stop_mu_);
  if (stopped_) return;
  stopped_ = true;
  hub_->Stop();
  if (thread_.joinable()) thread_.join();
  loop_->CloseAll();
  loop_.reset();
  close(listener_);
  close(epoll_fd_);
}

}  // namespace tessera::serve
