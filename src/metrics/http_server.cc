#include "metrics/http_server.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <set>
#include <unordered_map>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "base/heap_memory.h"
#include "base/string_util.h"

namespace tessera::metrics {
namespace {

// After answering, unread input (a body we never read) is discarded for at most this long and
// this much, so that closing does not reset the connection under the response in flight.
constexpr absl::Duration kMaxLinger = absl::Seconds(1);
constexpr size_t kMaxDrainBytes = 64 * 1024;
constexpr int kListenBacklog = 128;
// After out of descriptors (EMFILE), accepting pauses this long instead of spinning.
constexpr absl::Duration kAcceptPause = absl::Milliseconds(100);
constexpr uint64_t kListenerTag = ~uint64_t{0};
constexpr uint64_t kWakeTag = ~uint64_t{0} - 1;
constexpr int kEpollBatch = 256;

std::string_view ReasonPhrase(int status) {
  switch (status) {
    case 200: return "OK";
    case 204: return "No Content";
    case 301: return "Moved Permanently";
    case 302: return "Found";
    case 304: return "Not Modified";
    case 400: return "Bad Request";
    case 401: return "Unauthorized";
    case 403: return "Forbidden";
    case 404: return "Not Found";
    case 405: return "Method Not Allowed";
    case 408: return "Request Timeout";
    case 421: return "Misdirected Request";
    case 429: return "Too Many Requests";
    case 413: return "Content Too Large";
    case 414: return "URI Too Long";
    case 431: return "Request Header Fields Too Large";
    case 500: return "Internal Server Error";
    case 501: return "Not Implemented";
    case 503: return "Service Unavailable";
    default: return status < 400 ? "OK" : status < 500 ? "Client Error" : "Server Error";
  }
}

bool IsHeaderNameChar(char c) {
  return absl::ascii_isalnum(static_cast<unsigned char>(c)) ||
         std::string_view("!#$%&'*+-.^_`|~").find(c) != std::string_view::npos;
}

bool IsValidHeader(std::string_view name, std::string_view value) {
  if (name.empty()) return false;
  for (char c : name) {
    if (!IsHeaderNameChar(c)) return false;
  }
  for (char c : value) {
    const auto u = static_cast<unsigned char>(c);
    if (u != '\t' && (u < 0x20 || u == 0x7F)) return false;
  }
  return true;
}

std::string SystemError(std::string_view what, int error) {
  return absl::StrCat(ToAbsl(what), ": ", std::strerror(error));
}

std::string HttpDate(absl::Time now) {
  return absl::FormatTime("%a, %d %b %Y %H:%M:%S GMT", now, absl::UTCTimeZone());
}

// The bytes on the wire; the body left out for HEAD. An invalid status or header becomes a 500.
std::string Serialize(HttpResponse response, bool include_body) {
  bool valid = response.status >= 200 && response.status <= 599 &&
               IsValidHeader("Content-Type", response.content_type);
  for (const auto& [name, value] : response.headers) valid = valid && IsValidHeader(name, value);
  if (!valid) response = TextResponse(500, "the handler returned an invalid status or header");
  std::string out = absl::StrCat("HTTP/1.1 ", response.status, " ",
                                 ToAbsl(ReasonPhrase(response.status)), "\r\n");
  if (!response.content_type.empty()) {
    absl::StrAppend(&out, "Content-Type: ", response.content_type, "\r\n");
  }
  absl::StrAppend(&out, "Content-Length: ", response.body.size(), "\r\n",
                  "Date: ", HttpDate(absl::Now()), "\r\n", "Connection: close\r\n");
  for (const auto& [name, value] : response.headers) {
    absl::StrAppend(&out, name, ": ", value, "\r\n");
  }
  out += "\r\n";
  if (include_body) out += response.body;
  return out;
}

// Where the request head ends (just past its blank line), searching from `from`; npos if not yet.
size_t FindHeadEnd(std::string_view buffer, size_t from) {
  for (size_t i = from; i < buffer.size(); ++i) {
    if (buffer[i] != '\n') continue;
    if (i + 1 < buffer.size() && buffer[i + 1] == '\n') return i + 2;
    if (i + 2 < buffer.size() && buffer[i + 1] == '\r' && buffer[i + 2] == '\n') return i + 3;
  }
  return std::string_view::npos;
}

absl::Status ValidateOptions(const HttpServerOptions& options) {
  if (options.port < 0 || options.port > 65535) {
    return absl::InvalidArgumentError(absl::StrCat("port ", options.port, " is not 0..65535"));
  }
  if (options.worker_threads < 1 || options.worker_threads > 64) {
    return absl::InvalidArgumentError(
        absl::StrCat("worker_threads ", options.worker_threads, " is not 1..64"));
  }
  if (options.max_queued_requests < 1 || options.max_queued_requests > 4096) {
    return absl::InvalidArgumentError(
        absl::StrCat("max_queued_requests ", options.max_queued_requests, " is not 1..4096"));
  }
  if (options.max_connections < 16 || options.max_connections > 65536) {
    return absl::InvalidArgumentError(
        absl::StrCat("max_connections ", options.max_connections, " is not 16..65536"));
  }
  if (options.max_connections_per_client < 1 ||
      options.max_connections_per_client > options.max_connections) {
    return absl::InvalidArgumentError(
        absl::StrCat("max_connections_per_client ", options.max_connections_per_client,
                     " is not 1..max_connections (", options.max_connections, ")"));
  }
  if (options.max_head_bytes < 1024 || options.max_head_bytes > 1024 * 1024) {
    return absl::InvalidArgumentError(
        absl::StrCat("max_head_bytes ", options.max_head_bytes, " is not 1 KiB..1 MiB"));
  }
  if (options.read_timeout <= absl::ZeroDuration() ||
      options.write_timeout <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError("read_timeout and write_timeout must be positive");
  }
  for (const auto& [name, token] :
       {std::pair<std::string_view, const std::string&>{"bearer_token", options.bearer_token},
        {"scrape_token", options.scrape_token}}) {
    for (char c : token) {
      if (c <= 0x20 || c >= 0x7F) {
        // Never the token itself: it is a secret.
        return absl::InvalidArgumentError(
            absl::StrCat(ToAbsl(name),
                         " has a character an Authorization header cannot carry (visible "
                         "ASCII without spaces only)"));
      }
    }
  }
  return absl::OkStatus();
}

void CloseQuietly(int fd) {
  if (fd >= 0) close(fd);
}

// The client's address as text ("127.0.0.1", "fe80::1"); an IPv4-mapped IPv6 address as IPv4.
std::string ClientAddress(const sockaddr_storage& peer) {
  char text[INET6_ADDRSTRLEN] = "";
  if (peer.ss_family == AF_INET) {
    inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in*>(&peer)->sin_addr, text, sizeof(text));
  } else if (peer.ss_family == AF_INET6) {
    const in6_addr& address = reinterpret_cast<const sockaddr_in6*>(&peer)->sin6_addr;
    if (IN6_IS_ADDR_V4MAPPED(&address)) {
      inet_ntop(AF_INET, &address.s6_addr[12], text, sizeof(text));
    } else {
      inet_ntop(AF_INET6, &address, text, sizeof(text));
    }
  }
  return text[0] == '\0' ? std::string("?") : std::string(text);
}

bool IsLoopbackName(std::string_view host) {
  return host == "localhost" || host == "::1" || absl::StartsWith(ToAbsl(host), "127.");
}

bool IsEveryAddress(std::string_view host) {
  return host.empty() || host == "0.0.0.0" || host == "::";
}

// The host as a Host header names it: lower case, an IPv6 address without brackets.
std::string BareHost(std::string_view host) {
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  }
  return absl::AsciiStrToLower(ToAbsl(host));
}

// Answers a connection that is not taken in, with one non-blocking write (a fresh socket's
// buffer always takes a reply this small), and closes it. What the client already sent is read
// first, so that closing does not reset the connection under the reply.
void RefuseAndClose(int fd, const HttpResponse& response) {
  char sink[4096];
  for (int i = 0; i < 4 && recv(fd, sink, sizeof(sink), MSG_DONTWAIT) > 0; ++i) {
  }
  const std::string bytes = Serialize(response, true);
  (void)send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
  shutdown(fd, SHUT_WR);
  close(fd);
}

bool HasBody(const HttpRequest& request) {
  if (request.Header("transfer-encoding").has_value()) return true;
  const std::optional<std::string_view> length = request.Header("content-length");
  return length.has_value() && Trim(*length) != "0";
}

}  // namespace

HttpResponse TextResponse(int status, std::string_view message) {
  HttpResponse response;
  response.status = status;
  response.content_type = "text/plain; charset=utf-8";
  response.body = absl::StrCat(ToAbsl(message), "\n");
  return response;
}

// One open connection, as the accepting thread sees it.
struct HttpServer::Connection {
  enum class State {
    kReading,    // the request head is arriving (EPOLLIN)
    kWaiting,    // queued for or held by a worker (no events)
    kWriting,    // the answer is going out (EPOLLOUT)
    kLingering,  // answered and shut down; what the client still sends is dropped (EPOLLIN)
  };
  int fd = -1;
  std::string client;
  absl::Time accepted;
  State state = State::kReading;
  std::string in;
  size_t scan_from = 0;  // a blank line ending before here would have been found already
  std::string out;
  size_t written = 0;
  size_t drained = 0;
  absl::Time deadline = absl::InfiniteFuture();
};

// The accepting thread's state and steps. Touched by that thread only.
class HttpServer::Loop {
 public:
  explicit Loop(HttpServer& server) : server_(server), options_(server.options_) {
    const std::string bound = BareHost(options_.host);
    accept_any_host_ = IsEveryAddress(bound);
    host_names_.insert(bound);
    if (IsLoopbackName(bound)) host_names_.insert({"localhost", "127.0.0.1", "::1"});
    for (const std::string& name : options_.allowed_host_names) host_names_.insert(BareHost(name));
  }
  ~Loop() {
    std::vector<uint64_t> ids;
    for (const auto& [id, connection] : connections_) ids.push_back(id);
    for (uint64_t id : ids) Close(id);
  }

  void Run();

 private:
  struct Client {
    int open = 0;
    std::set<uint64_t> reading;  // ids, oldest first
  };

  void AcceptAll();
  // Makes room by closing the oldest connection in `reading` (408); false when it is empty.
  bool EvictOldestReader(const std::set<uint64_t>& reading, absl::Time now);
  void OnEvent(uint64_t id, uint32_t events);
  void Read(Connection& connection, uint64_t id);
  void Dispatch(Connection& connection, uint64_t id, bool too_large);
  // The checks before a worker: a response when the request ends here, else nullopt (queued).
  std::optional<HttpResponse> Check(uint64_t id, HttpRequest& request);
  bool HostAllowed(const HttpRequest& request, HttpResponse& refusal) const;
  void Reply(Connection& connection, uint64_t id, std::string bytes);
  void Write(Connection& connection, uint64_t id);
  void Drain(Connection& connection, uint64_t id);
  void TakeAnswers();
  void Expire(absl::Time now);
  void SetDeadline(Connection& connection, uint64_t id, absl::Time deadline);
  void StopReading(Connection& connection, uint64_t id);
  void Watch(int fd, uint64_t id, uint32_t events, int op = EPOLL_CTL_MOD) const;
  void Close(uint64_t id);

  HttpServer& server_;
  const HttpServerOptions& options_;
  bool accept_any_host_ = false;
  std::set<std::string> host_names_;
  uint64_t next_id_ = 1;
  std::unordered_map<uint64_t, Connection> connections_;
  std::unordered_map<std::string, Client> clients_;
  std::set<uint64_t> reading_;                           // every client's, oldest first
  std::set<std::pair<absl::Time, uint64_t>> deadlines_;  // soonest first
  absl::Time accept_paused_until_ = absl::InfinitePast();
};

void HttpServer::Loop::Watch(int fd, uint64_t id, uint32_t events, int op) const {
  epoll_event event{};
  event.events = events;
  event.data.u64 = id;
  (void)epoll_ctl(server_.epoll_fd_, op, fd, &event);
}

void HttpServer::Loop::Run() {
  Watch(server_.listener_, kListenerTag, EPOLLIN, EPOLL_CTL_ADD);
  Watch(server_.wake_fd_, kWakeTag, EPOLLIN, EPOLL_CTL_ADD);
  epoll_event events[kEpollBatch];
  while (true) {
    absl::Time next = deadlines_.empty() ? absl::InfiniteFuture() : deadlines_.begin()->first;
    if (accept_paused_until_ != absl::InfinitePast()) next = std::min(next, accept_paused_until_);
    int timeout_ms = -1;
    if (next != absl::InfiniteFuture()) {
      const absl::Duration left = std::max(absl::ZeroDuration(), next - absl::Now());
      timeout_ms = static_cast<int>(std::min<int64_t>(
          absl::ToInt64Milliseconds(absl::Ceil(left, absl::Milliseconds(1))), 3600 * 1000));
    }
    const int n = epoll_wait(server_.epoll_fd_, events, kEpollBatch, timeout_ms);
    if (n < 0 && errno != EINTR) return;  // cannot wait at all (never with valid descriptors)
    for (int i = 0; i < n; ++i) {
      const uint64_t id = events[i].data.u64;
      if (id == kListenerTag) {
        AcceptAll();
      } else if (id == kWakeTag) {
        uint64_t count = 0;
        while (read(server_.wake_fd_, &count, sizeof(count)) < 0 && errno == EINTR) {
        }
        {
          absl::MutexLock lock(&server_.mu_);
          if (server_.stopping_) return;
        }
        TakeAnswers();
      } else {
        OnEvent(id, events[i].events);
      }
    }
    const absl::Time now = absl::Now();
    if (accept_paused_until_ != absl::InfinitePast() && now >= accept_paused_until_) {
      accept_paused_until_ = absl::InfinitePast();
      Watch(server_.listener_, kListenerTag, EPOLLIN);
    }
    Expire(now);
  }
}

void HttpServer::Loop::AcceptAll() {
  while (true) {
    sockaddr_storage peer{};
    socklen_t peer_size = sizeof(peer);
    const int fd = accept4(server_.listener_, reinterpret_cast<sockaddr*>(&peer), &peer_size,
                           SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (fd < 0) {
      if (errno == EINTR || errno == ECONNABORTED) continue;
      if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
        // Out of descriptors or memory: a slow reader makes room, else accepting pauses (the
        // listener would stay readable and spin the loop).
        if (EvictOldestReader(reading_, absl::Now())) continue;
        accept_paused_until_ = absl::Now() + kAcceptPause;
        Watch(server_.listener_, kListenerTag, 0);
      }
      return;  // EAGAIN: every waiting connection is accepted
    }
    const absl::Time now = absl::Now();
    std::string client = ClientAddress(peer);
    if (static_cast<int>(connections_.size()) >= options_.max_connections &&
        !EvictOldestReader(reading_, now)) {
      RefuseAndClose(fd, TextResponse(503, absl::StrCat("server busy: ", options_.max_connections,
                                                        " connections open")));
      continue;
    }
    if (auto it = clients_.find(client); it != clients_.end() &&
                                         it->second.open >= options_.max_connections_per_client &&
                                         !EvictOldestReader(it->second.reading, now)) {
      RefuseAndClose(
          fd, TextResponse(429, absl::StrCat("too many connections from ", client, ": ",
                                             options_.max_connections_per_client, " are open")));
      continue;
    }
    const uint64_t id = next_id_++;
    Connection& connection = connections_[id];
    connection.fd = fd;
    connection.client = client;
    connection.accepted = now;
    Client& counts = clients_[client];
    ++counts.open;
    counts.reading.insert(id);
    reading_.insert(id);
    SetDeadline(connection, id, now + options_.read_timeout);
    Watch(fd, id, EPOLLIN, EPOLL_CTL_ADD);
  }
}

bool HttpServer::Loop::EvictOldestReader(const std::set<uint64_t>& reading, absl::Time now) {
  if (reading.empty()) return false;
  const uint64_t oldest = *reading.begin();
  Connection& connection = connections_.at(oldest);
  const absl::Duration age = now - connection.accepted;
  const int fd = connection.fd;
  connection.fd = -1;  // handed to RefuseAndClose
  (void)epoll_ctl(server_.epoll_fd_, EPOLL_CTL_DEL, fd, nullptr);
  Close(oldest);
  RefuseAndClose(
      fd,
      TextResponse(408, absl::StrCat("no whole request head after ",
                                     absl::FormatDuration(absl::Trunc(age, absl::Milliseconds(1))),
                                     ", and newer connections are waiting")));
  return true;
}

void HttpServer::Loop::SetDeadline(Connection& connection, uint64_t id, absl::Time deadline) {
  if (connection.deadline != absl::InfiniteFuture()) deadlines_.erase({connection.deadline, id});
  connection.deadline = deadline;
  if (deadline != absl::InfiniteFuture()) deadlines_.insert({deadline, id});
}

void HttpServer::Loop::StopReading(Connection& connection, uint64_t id) {
  reading_.erase(id);
  if (auto it = clients_.find(connection.client); it != clients_.end())
    it->second.reading.erase(id);
}

void HttpServer::Loop::Close(uint64_t id) {
  auto it = connections_.find(id);
  if (it == connections_.end()) return;
  Connection& connection = it->second;
  if (connection.fd >= 0) {
    (void)epoll_ctl(server_.epoll_fd_, EPOLL_CTL_DEL, connection.fd, nullptr);
    close(connection.fd);
  }
  SetDeadline(connection, id, absl::InfiniteFuture());
  StopReading(connection, id);
  if (auto client = clients_.find(connection.client); client != clients_.end()) {
    if (--client->second.open <= 0) clients_.erase(client);
  }
  connections_.erase(it);
}

void HttpServer::Loop::OnEvent(uint64_t id, uint32_t events) {
  auto it = connections_.find(id);
  if (it == connections_.end()) return;
  Connection& connection = it->second;
  switch (connection.state) {
    case Connection::State::kReading:
      if ((events & EPOLLIN) != 0) {
        Read(connection, id);
      } else {
        Close(id);  // EPOLLERR or EPOLLHUP with nothing to read
      }
      return;
    case Connection::State::kWaiting:
      Close(id);  // only EPOLLERR or EPOLLHUP: the client is gone; its answer will be dropped
      return;
    case Connection::State::kWriting:
      if ((events & EPOLLOUT) != 0) {
        Write(connection, id);
      } else {
        Close(id);
      }
      return;
    case Connection::State::kLingering: Drain(connection, id); return;
  }
}

void HttpServer::Loop::Read(Connection& connection, uint64_t id) {
  char chunk[4096];
  while (true) {
    // Never more than a few bytes past the limit, so the limit bounds the buffer.
    const size_t room =
        options_.max_head_bytes + 3 - std::min(connection.in.size(), options_.max_head_bytes + 3);
    if (room == 0) {
      Dispatch(connection, id, /*too_large=*/true);
      return;
    }
    const ssize_t n = recv(connection.fd, chunk, std::min(sizeof(chunk), room), 0);
    if (n > 0) {
      connection.in.append(chunk, static_cast<size_t>(n));
      const size_t head_end = FindHeadEnd(connection.in, connection.scan_from);
      connection.scan_from = connection.in.size() < 2 ? 0 : connection.in.size() - 2;
      if (head_end != std::string::npos) {
        connection.in.resize(head_end);  // a body, never read, is not kept either
        Dispatch(connection, id, head_end > options_.max_head_bytes);
        return;
      }
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
    Close(id);  // the client closed (or broke) before a whole request
    return;
  }
}

void HttpServer::Loop::Dispatch(Connection& connection, uint64_t id, bool too_large) {
  StopReading(connection, id);
  SetDeadline(connection, id, absl::InfiniteFuture());
  if (too_large) {
    Reply(connection, id,
          Serialize(TextResponse(431, absl::StrCat("the request line and headers exceed ",
                                                   options_.max_head_bytes, " bytes")),
                    true));
    return;
  }
  absl::StatusOr<HttpRequest> request = ParseHttpRequestHead(connection.in);
  std::string().swap(connection.in);
  if (!request.ok()) {
    Reply(connection, id,
          Serialize(TextResponse(400, absl::StrCat("bad request: ", request.status().message())),
                    true));
    return;
  }
  const bool include_body = request->method != "HEAD";
  std::optional<HttpResponse> refusal = Check(id, *request);
  if (refusal.has_value()) {
    Reply(connection, id, Serialize(std::move(*refusal), include_body));
    return;
  }
  connection.state = Connection::State::kWaiting;
  Watch(connection.fd, id, 0);
}

bool HttpServer::Loop::HostAllowed(const HttpRequest& request, HttpResponse& refusal) const {
  const std::optional<std::string_view> header = request.Header("host");
  if (!header.has_value()) {
    if (request.minor_version == 0) return true;  // HTTP/1.0 may leave it out
    refusal = TextResponse(400, "bad request: no Host header");
    return false;
  }
  absl::StatusOr<HostAndPort> host = ParseHostHeader(*header);
  if (!host.ok()) {
    refusal = TextResponse(400, absl::StrCat("bad request: ", host.status().message()));
    return false;
  }
  const bool port_ok = host->port == -1 || host->port == server_.port_;
  if (port_ok && (accept_any_host_ || host_names_.contains(host->host))) return true;
  refusal =
      TextResponse(421, absl::StrCat("misdirected request: this server does not answer for Host ",
                                     Quote(*header), " (", options_.host, ":", server_.port_, ")"));
  return false;
}

std::optional<HttpResponse> HttpServer::Loop::Check(uint64_t id, HttpRequest& request) {
  HttpResponse refusal;
  if (!HostAllowed(request, refusal)) return refusal;
  if (HasBody(request)) {
    return TextResponse(413, "a request body is not accepted (GET, HEAD, or POST without one)");
  }
  const std::shared_ptr<const Route> route = server_.FindRoute(request.path);
  const HttpAccess access = route == nullptr ? HttpAccess::kCredential : route->options.access;
  if (!options_.bearer_token.empty() && access != HttpAccess::kPublic) {
    bool authorized = false;
    if (std::optional<std::string_view> header = request.Header("authorization")) {
      constexpr std::string_view kScheme = "bearer ";
      if (header->size() > kScheme.size() &&
          absl::EqualsIgnoreCase(ToAbsl(header->substr(0, kScheme.size())), ToAbsl(kScheme))) {
        const std::string_view credential = Trim(header->substr(kScheme.size()));
        const bool session_may =
            access == HttpAccess::kCredential || access == HttpAccess::kMetrics;
        authorized = ConstantTimeEquals(credential, options_.bearer_token) ||
                     (session_may && options_.sessions != nullptr &&
                      options_.sessions->IsSession(credential)) ||
                     (access == HttpAccess::kMetrics && !options_.scrape_token.empty() &&
                      ConstantTimeEquals(credential, options_.scrape_token));
      }
    }
    if (!authorized) {
      HttpResponse response = TextResponse(
          401, access == HttpAccess::kToken
                   ? "unauthorized: send \"Authorization: Bearer <the cluster token>\""
                   : "unauthorized: send \"Authorization: Bearer <the cluster token>\" (or open "
                     "the dashboard with `tessera dashboard`)");
      response.headers.emplace_back("WWW-Authenticate", "Bearer");
      return response;
    }
  }
  // Handlers never see a credential (so they cannot log it).
  std::erase_if(request.headers,
                [](const auto& header) { return header.first == "authorization"; });
  const bool post = route != nullptr && route->options.allow_post;
  if (request.method != "GET" && request.method != "HEAD" && !(post && request.method == "POST")) {
    HttpResponse response =
        TextResponse(405, absl::StrCat("method ", Quote(request.method),
                                       " is not allowed (GET, HEAD", post ? ", POST" : "", ")"));
    response.headers.emplace_back("Allow", post ? "GET, HEAD, POST" : "GET, HEAD");
    return response;
  }
  if (route == nullptr) return TextResponse(404, absl::StrCat("not found: ", Quote(request.path)));
  {
    absl::MutexLock lock(&server_.mu_);
    if (server_.jobs_.size() < static_cast<size_t>(options_.max_queued_requests)) {
      server_.jobs_.push_back(Job{id, route, std::move(request)});
      server_.queued_.Signal();
      return std::nullopt;
    }
  }
  return TextResponse(
      503, absl::StrCat("server busy: ", options_.worker_threads, " workers answering and ",
                        options_.max_queued_requests, " requests waiting"));
}

void HttpServer::Loop::Reply(Connection& connection, uint64_t id, std::string bytes) {
  connection.state = Connection::State::kWriting;
  connection.out = std::move(bytes);
  connection.written = 0;
  SetDeadline(connection, id, absl::Now() + options_.write_timeout);
  Watch(connection.fd, id, EPOLLOUT);
  Write(connection, id);
}

void HttpServer::Loop::Write(Connection& connection, uint64_t id) {
  while (connection.written < connection.out.size()) {
    const ssize_t n = send(connection.fd, connection.out.data() + connection.written,
                           connection.out.size() - connection.written, MSG_NOSIGNAL);
    if (n > 0) {
      connection.written += static_cast<size_t>(n);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;  // EPOLLOUT brings us back
    Close(id);
    return;
  }
  std::string().swap(connection.out);
  // Our side is done; read and drop what the client still sends until it closes.
  shutdown(connection.fd, SHUT_WR);
  connection.state = Connection::State::kLingering;
  SetDeadline(connection, id, absl::Now() + std::min(kMaxLinger, options_.read_timeout));
  Watch(connection.fd, id, EPOLLIN);
}

void HttpServer::Loop::Drain(Connection& connection, uint64_t id) {
  char chunk[4096];
  while (connection.drained < kMaxDrainBytes) {
    const ssize_t n = recv(connection.fd, chunk, sizeof(chunk), 0);
    if (n > 0) {
      connection.drained += static_cast<size_t>(n);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
    break;  // the client closed
  }
  Close(id);
}

void HttpServer::Loop::TakeAnswers() {
  std::vector<Answer> answers;
  {
    absl::MutexLock lock(&server_.mu_);
    answers.swap(server_.answers_);
  }
  for (Answer& answer : answers) {
    auto it = connections_.find(answer.connection);
    if (it == connections_.end() || it->second.state != Connection::State::kWaiting) continue;
    Reply(it->second, answer.connection, std::move(answer.bytes));
  }
}

void HttpServer::Loop::Expire(absl::Time now) {
  while (!deadlines_.empty() && deadlines_.begin()->first <= now) {
    const uint64_t id = deadlines_.begin()->second;
    Connection& connection = connections_.at(id);
    if (connection.state == Connection::State::kReading) {
      StopReading(connection, id);
      SetDeadline(connection, id, absl::InfiniteFuture());
      std::string().swap(connection.in);
      Reply(connection, id,
            Serialize(TextResponse(408, absl::StrCat("no whole request head within ",
                                                     absl::FormatDuration(options_.read_timeout))),
                      true));
    } else {
      Close(id);  // a write past write_timeout, or the linger's end
    }
  }
}

absl::StatusOr<std::unique_ptr<HttpServer>> HttpServer::Start(HttpServerOptions options) {
  if (absl::Status valid = ValidateOptions(options); !valid.ok()) return valid;
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  addrinfo* addresses = nullptr;
  const std::string port_text = std::to_string(options.port);
  const std::string where =
      absl::StrCat(options.host.empty() ? "*" : options.host, ":", options.port);
  if (const int rc = getaddrinfo(options.host.empty() ? nullptr : options.host.c_str(),
                                 port_text.c_str(), &hints, &addresses);
      rc != 0) {
    return absl::UnavailableError(absl::StrCat("cannot resolve ", where, ": ", gai_strerror(rc)));
  }
  int listener = -1;
  std::string failure = "no address to bind";
  for (addrinfo* a = addresses; a != nullptr && listener < 0; a = a->ai_next) {
    const int fd =
        socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, a->ai_protocol);
    if (fd < 0) {
      failure = SystemError("socket", errno);
      continue;
    }
    const int on = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &on, sizeof(on));
    if (bind(fd, a->ai_addr, a->ai_addrlen) != 0) {
      failure = SystemError("bind", errno);
      close(fd);
      continue;
    }
    if (listen(fd, kListenBacklog) != 0) {
      failure = SystemError("listen", errno);
      close(fd);
      continue;
    }
    listener = fd;
  }
  freeaddrinfo(addresses);
  if (listener < 0) {
    return absl::UnavailableError(absl::StrCat("cannot listen on ", where, ": ", failure));
  }
  sockaddr_storage bound{};
  socklen_t bound_size = sizeof(bound);
  getsockname(listener, reinterpret_cast<sockaddr*>(&bound), &bound_size);
  int port = 0;
  if (bound.ss_family == AF_INET) {
    port = ntohs(reinterpret_cast<sockaddr_in*>(&bound)->sin_port);
  } else if (bound.ss_family == AF_INET6) {
    port = ntohs(reinterpret_cast<sockaddr_in6*>(&bound)->sin6_port);
  }
  // The address bound is a name the Host header may use too (a host name resolved to it).
  options.allowed_host_names.push_back(ClientAddress(bound));
  const int epoll_fd = epoll_create1(EPOLL_CLOEXEC);
  const int wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (epoll_fd < 0 || wake_fd < 0) {
    const int error = errno;
    CloseQuietly(epoll_fd);
    CloseQuietly(wake_fd);
    close(listener);
    return absl::UnavailableError(SystemError("cannot create the event loop", error));
  }
  std::unique_ptr<HttpServer> server(
      new HttpServer(std::move(options), listener, port, epoll_fd, wake_fd));
  server->loop_ = std::make_unique<Loop>(*server);
  server->accept_thread_ = std::thread([s = server.get()] { s->loop_->Run(); });
  for (int i = 0; i < server->options_.worker_threads; ++i) {
    server->workers_.emplace_back([s = server.get()] { s->WorkerLoop(); });
  }
  return server;
}

HttpServer::HttpServer(HttpServerOptions options, int listener, int port, int epoll_fd, int wake_fd)
    : options_(std::move(options)),
      listener_(listener),
      port_(port),
      epoll_fd_(epoll_fd),
      wake_fd_(wake_fd) {}

HttpServer::~HttpServer() { Stop(); }

void HttpServer::Wake() const {
  const uint64_t one = 1;
  while (write(wake_fd_, &one, sizeof(one)) < 0 && errno == EINTR) {
  }
}

void HttpServer::Stop() {
  absl::MutexLock stop_lock(&stop_mu_);
  if (stopped_) return;
  stopped_ = true;
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
    queued_.SignalAll();
  }
  Wake();
  if (accept_thread_.joinable()) accept_thread_.join();
  for (std::thread& worker : workers_) worker.join();
  workers_.clear();
  loop_.reset();  // closes every connection
  {
    absl::MutexLock lock(&mu_);
    jobs_.clear();
    answers_.clear();
  }
  CloseQuietly(listener_);
  CloseQuietly(epoll_fd_);
  CloseQuietly(wake_fd_);
}

absl::Status HttpServer::AddRoute(RouteKind kind, std::string path, HttpHandler handler,
                                  HttpRouteOptions route) {
  if (path.empty() || path[0] != '/') {
    return absl::InvalidArgumentError(
        absl::StrCat("route ", Quote(path), " does not start with '/'"));
  }
  if (handler == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat("route ", path, " has an empty handler"));
  }
  absl::MutexLock lock(&mu_);
  auto& routes = kind == RouteKind::kExact ? exact_routes_ : prefix_routes_;
  const auto [it, added] =
      routes.emplace(path, std::make_shared<const Route>(Route{std::move(handler), route}));
  if (!added) {
    return absl::AlreadyExistsError(absl::StrCat(
        kind == RouteKind::kExact ? "route " : "prefix route ", path, " is already handled"));
  }
  return absl::OkStatus();
}

absl::Status HttpServer::Handle(std::string path, HttpHandler handler, HttpRouteOptions route) {
  return AddRoute(RouteKind::kExact, std::move(path), std::move(handler), route);
}

absl::Status HttpServer::HandlePrefix(std::string prefix, HttpHandler handler,
                                      HttpRouteOptions route) {
  return AddRoute(RouteKind::kPrefix, std::move(prefix), std::move(handler), route);
}

std::shared_ptr<const HttpServer::Route> HttpServer::FindRoute(const std::string& path) const {
  absl::ReaderMutexLock lock(&mu_);
  if (auto it = exact_routes_.find(path); it != exact_routes_.end()) return it->second;
  std::shared_ptr<const Route> best;
  size_t best_length = 0;
  for (const auto& [prefix, route] : prefix_routes_) {
    if (prefix.size() >= best_length && absl::StartsWith(path, prefix)) {
      best = route;
      best_length = prefix.size();
    }
  }
  return best;
}

void HttpServer::WorkerLoop() {
  while (true) {
    Job job;
    {
      absl::MutexLock lock(&mu_);
      while (!stopping_ && jobs_.empty()) queued_.Wait(&mu_);
      if (stopping_) return;
      job = std::move(jobs_.front());
      jobs_.pop_front();
    }
    const bool include_body = job.request.method != "HEAD";
    std::string bytes = Serialize(job.route->handler(job.request), include_body);
    const size_t size = bytes.size();
    {
      absl::MutexLock lock(&mu_);
      if (stopping_) return;
      answers_.push_back(Answer{job.connection, std::move(bytes)});
    }
    Wake();
    // The handler's temporaries are freed by now (the answer itself goes once written).
    if (options_.release_memory_after_bytes > 0 && size >= options_.release_memory_after_bytes) {
      ReleaseFreeHeapMemory();
    }
  }
}

}  // namespace tessera::metrics
