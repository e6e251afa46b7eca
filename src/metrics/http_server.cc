#include "metrics/http_server.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

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
    case 413: return "Content Too Large";
    case 414: return "URI Too Long";
    case 431: return "Request Header Fields Too Large";
    case 500: return "Internal Server Error";
    case 501: return "Not Implemented";
    case 503: return "Service Unavailable";
    default: return status < 400 ? "OK" : status < 500 ? "Client Error" : "Server Error";
  }
}

// Takes as long for any `given` of a length: the loop runs over `expected` and never exits early.
bool ConstantTimeEquals(std::string_view given, std::string_view expected) {
  unsigned char difference = given.size() == expected.size() ? 0 : 1;
  for (size_t i = 0; i < expected.size(); ++i) {
    const char g = i < given.size() ? given[i] : 0;
    difference |= static_cast<unsigned char>(g ^ expected[i]);
  }
  // Keep the compiler from turning the loop into an early-exit comparison.
  volatile unsigned char result = difference;
  return result == 0;
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

enum class Wait { kReady, kTimedOut, kStopping };

// Waits until `fd` has `events`, `deadline` passes, or the stop pipe is written.
Wait WaitFor(int fd, short events, int wake_fd, absl::Time deadline) {
  while (true) {
    const absl::Duration left = deadline - absl::Now();
    if (left <= absl::ZeroDuration()) return Wait::kTimedOut;
    const int64_t ms = std::min<int64_t>(absl::ToInt64Milliseconds(absl::Ceil(left, absl::Milliseconds(1))),
                                         24 * 3600 * 1000);
    pollfd fds[2] = {{fd, events, 0}, {wake_fd, POLLIN, 0}};
    const int n = poll(fds, 2, static_cast<int>(ms));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return Wait::kStopping;  // cannot wait at all: give the connection up
    if (fds[1].revents != 0) return Wait::kStopping;
    if (fds[0].revents != 0) return Wait::kReady;
  }
}

// False when the peer went away, the deadline passed or the server is stopping.
bool WriteAll(int fd, std::string_view data, int wake_fd, absl::Time deadline) {
  while (!data.empty()) {
    const ssize_t n = send(fd, data.data(), data.size(), MSG_NOSIGNAL);
    if (n > 0) {
      data.remove_prefix(static_cast<size_t>(n));
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      if (WaitFor(fd, POLLOUT, wake_fd, deadline) != Wait::kReady) return false;
      continue;
    }
    return false;
  }
  return true;
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
  absl::StrAppend(&out, "Content-Length: ", response.body.size(), "\r\n", "Date: ",
                  HttpDate(absl::Now()), "\r\n", "Connection: close\r\n");
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
  if (options.max_queued_connections < 1 || options.max_queued_connections > 4096) {
    return absl::InvalidArgumentError(absl::StrCat(
        "max_queued_connections ", options.max_queued_connections, " is not 1..4096"));
  }
  if (options.max_head_bytes < 1024 || options.max_head_bytes > 1024 * 1024) {
    return absl::InvalidArgumentError(
        absl::StrCat("max_head_bytes ", options.max_head_bytes, " is not 1 KiB..1 MiB"));
  }
  if (options.read_timeout <= absl::ZeroDuration() ||
      options.write_timeout <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError("read_timeout and write_timeout must be positive");
  }
  for (char c : options.bearer_token) {
    if (c <= 0x20 || c >= 0x7F) {
      // Never the token itself: it is a secret.
      return absl::InvalidArgumentError(
          "bearer_token has a character an Authorization header cannot carry (visible ASCII "
          "without spaces only)");
    }
  }
  return absl::OkStatus();
}

void CloseQuietly(int fd) {
  if (fd >= 0) close(fd);
}

}  // namespace

HttpResponse TextResponse(int status, std::string_view message) {
  HttpResponse response;
  response.status = status;
  response.content_type = "text/plain; charset=utf-8";
  response.body = absl::StrCat(ToAbsl(message), "\n");
  return response;
}

absl::StatusOr<std::unique_ptr<HttpServer>> HttpServer::Start(HttpServerOptions options) {
  if (absl::Status valid = ValidateOptions(options); !valid.ok()) return valid;
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  addrinfo* addresses = nullptr;
  const std::string port_text = std::to_string(options.port);
  const std::string where = absl::StrCat(options.host.empty() ? "*" : options.host, ":",
                                         options.port);
  if (const int rc = getaddrinfo(options.host.empty() ? nullptr : options.host.c_str(),
                                 port_text.c_str(), &hints, &addresses);
      rc != 0) {
    return absl::UnavailableError(
        absl::StrCat("cannot resolve ", where, ": ", gai_strerror(rc)));
  }
  int listener = -1;
  std::string failure = "no address to bind";
  for (addrinfo* a = addresses; a != nullptr && listener < 0; a = a->ai_next) {
    const int fd = socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK,
                          a->ai_protocol);
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
  int wake[2];
  if (pipe2(wake, O_CLOEXEC | O_NONBLOCK) != 0) {
    const int error = errno;
    close(listener);
    return absl::UnavailableError(SystemError("cannot create the stop pipe", error));
  }
  std::unique_ptr<HttpServer> server(
      new HttpServer(std::move(options), listener, port, wake[0], wake[1]));
  server->accept_thread_ = std::thread([s = server.get()] { s->AcceptLoop(); });
  for (int i = 0; i < server->options_.worker_threads; ++i) {
    server->workers_.emplace_back([s = server.get()] { s->WorkerLoop(); });
  }
  return server;
}

HttpServer::HttpServer(HttpServerOptions options, int listener, int port, int wake_read,
                       int wake_write)
    : options_(std::move(options)),
      listener_(listener),
      port_(port),
      wake_read_(wake_read),
      wake_write_(wake_write) {}

HttpServer::~HttpServer() { Stop(); }

void HttpServer::Stop() {
  absl::MutexLock stop_lock(&stop_mu_);
  if (stopped_) return;
  stopped_ = true;
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
    queued_.SignalAll();
  }
  const char byte = 1;
  while (write(wake_write_, &byte, 1) < 0 && errno == EINTR) {
  }
  if (accept_thread_.joinable()) accept_thread_.join();
  for (std::thread& worker : workers_) worker.join();
  workers_.clear();
  {
    absl::MutexLock lock(&mu_);
    for (int fd : queue_) CloseQuietly(fd);
    queue_.clear();
  }
  CloseQuietly(listener_);
  CloseQuietly(wake_read_);
  CloseQuietly(wake_write_);
}

absl::Status HttpServer::AddRoute(RouteKind kind, std::string path, HttpHandler handler) {
  if (path.empty() || path[0] != '/') {
    return absl::InvalidArgumentError(absl::StrCat("route ", Quote(path), " does not start with '/'"));
  }
  if (handler == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat("route ", path, " has an empty handler"));
  }
  absl::MutexLock lock(&mu_);
  auto& routes = kind == RouteKind::kExact ? exact_routes_ : prefix_routes_;
  const auto [it, added] =
      routes.emplace(path, std::make_shared<const HttpHandler>(std::move(handler)));
  if (!added) {
    return absl::AlreadyExistsError(absl::StrCat(
        kind == RouteKind::kExact ? "route " : "prefix route ", path, " is already handled"));
  }
  return absl::OkStatus();
}

absl::Status HttpServer::Handle(std::string path, HttpHandler handler) {
  return AddRoute(RouteKind::kExact, std::move(path), std::move(handler));
}

absl::Status HttpServer::HandlePrefix(std::string prefix, HttpHandler handler) {
  return AddRoute(RouteKind::kPrefix, std::move(prefix), std::move(handler));
}

std::shared_ptr<const HttpHandler> HttpServer::FindRoute(const std::string& path) const {
  absl::ReaderMutexLock lock(&mu_);
  if (auto it = exact_routes_.find(path); it != exact_routes_.end()) return it->second;
  std::shared_ptr<const HttpHandler> best;
  size_t best_length = 0;
  for (const auto& [prefix, handler] : prefix_routes_) {
    if (prefix.size() >= best_length && absl::StartsWith(path, prefix)) {
      best = handler;
      best_length = prefix.size();
    }
  }
  return best;
}

void HttpServer::AcceptLoop() {
  while (true) {
    pollfd fds[2] = {{listener_, POLLIN, 0}, {wake_read_, POLLIN, 0}};
    const int n = poll(fds, 2, -1);
    if (n < 0) continue;  // EINTR (nothing else can fail with valid descriptors)
    if (fds[1].revents != 0) return;
    while (true) {
      const int fd = accept4(listener_, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
      if (fd < 0) {
        if (errno == EINTR || errno == ECONNABORTED) continue;
        if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
          // Out of descriptors or memory: the listener stays readable, so wait a moment (or
          // for Stop) instead of spinning.
          pollfd wake = {wake_read_, POLLIN, 0};
          poll(&wake, 1, 100);
        }
        break;  // EAGAIN: every waiting connection is accepted
      }
      bool queued = false;
      bool stopping = false;
      {
        absl::MutexLock lock(&mu_);
        stopping = stopping_;
        if (!stopping && queue_.size() < static_cast<size_t>(options_.max_queued_connections)) {
          queue_.push_back(fd);
          queued_.Signal();
          queued = true;
        }
      }
      if (stopping) {
        close(fd);
      } else if (!queued) {
        // One non-blocking write: a fresh socket's buffer always takes a reply this small.
        const std::string busy = Serialize(
            TextResponse(503, absl::StrCat("server busy: ", options_.worker_threads,
                                           " workers serving and ",
                                           options_.max_queued_connections, " waiting")),
            true);
        (void)send(fd, busy.data(), busy.size(), MSG_NOSIGNAL);
        shutdown(fd, SHUT_WR);
        close(fd);
      }
    }
  }
}

void HttpServer::WorkerLoop() {
  while (true) {
    int fd = -1;
    {
      absl::MutexLock lock(&mu_);
      while (!stopping_ && queue_.empty()) queued_.Wait(&mu_);
      if (stopping_) return;
      fd = queue_.front();
      queue_.pop_front();
    }
    Serve(fd);
  }
}

void HttpServer::Serve(int fd) {
  const absl::Time read_deadline = absl::Now() + options_.read_timeout;
  std::string buffer;
  size_t head_end = std::string::npos;
  bool head_too_large = false;
  bool stopping_or_gone = false;
  bool timed_out = false;
  size_t scan_from = 0;  // a blank line ending before here would have been found already
  char chunk[4096];
  while (true) {
    head_end = FindHeadEnd(buffer, scan_from);
    scan_from = buffer.size() < 2 ? 0 : buffer.size() - 2;
    if (head_end != std::string::npos) {
      head_too_large = head_end > options_.max_head_bytes;
      break;
    }
    if (buffer.size() > options_.max_head_bytes) {
      head_too_large = true;
      break;
    }
    const Wait wait = WaitFor(fd, POLLIN, wake_read_, read_deadline);
    if (wait == Wait::kStopping) {
      stopping_or_gone = true;
      break;
    }
    if (wait == Wait::kTimedOut) {
      timed_out = true;
      break;
    }
    // Never more than a few bytes past the limit, so the limit bounds the buffer.
    const size_t want = std::min(sizeof(chunk), options_.max_head_bytes + 3 - buffer.size());
    const ssize_t n = recv(fd, chunk, want, 0);
    if (n > 0) {
      buffer.append(chunk, static_cast<size_t>(n));
    } else if (n == 0 || (errno != EINTR && errno != EAGAIN && errno != EWOULDBLOCK)) {
      stopping_or_gone = true;  // the client closed (or broke) before a whole request
      break;
    }
  }
  if (stopping_or_gone) {
    close(fd);
    return;
  }
  HttpResponse response;
  bool include_body = true;
  if (timed_out) {
    response = TextResponse(408, absl::StrCat("no whole request head within ",
                                              absl::FormatDuration(options_.read_timeout)));
  } else if (head_too_large) {
    response = TextResponse(431, absl::StrCat("the request line and headers exceed ",
                                              options_.max_head_bytes, " bytes"));
  } else {
    absl::StatusOr<HttpRequest> request =
        ParseHttpRequestHead(std::string_view(buffer).substr(0, head_end));
    if (!request.ok()) {
      response = TextResponse(400, absl::StrCat("bad request: ", request.status().message()));
    } else {
      include_body = request->method != "HEAD";
      response = Respond(*request);
    }
  }
  std::string bytes = Serialize(std::move(response), include_body);
  if (WriteAll(fd, bytes, wake_read_, absl::Now() + options_.write_timeout)) {
    // Our side is done; read and drop what the client still sends until it closes.
    shutdown(fd, SHUT_WR);
    const absl::Time linger_deadline = absl::Now() + std::min(kMaxLinger, options_.read_timeout);
    size_t drained = 0;
    while (drained < kMaxDrainBytes &&
           WaitFor(fd, POLLIN, wake_read_, linger_deadline) == Wait::kReady) {
      const ssize_t n = recv(fd, chunk, sizeof(chunk), 0);
      if (n == 0 || (n < 0 && errno != EINTR && errno != EAGAIN)) break;
      if (n > 0) drained += static_cast<size_t>(n);
    }
  }
  close(fd);
  if (options_.release_memory_after_bytes > 0 &&
      bytes.size() >= options_.release_memory_after_bytes) {
    std::string().swap(bytes);
    ReleaseFreeHeapMemory();
  }
}

HttpResponse HttpServer::Respond(HttpRequest& request) {
  if (!options_.bearer_token.empty()) {
    bool authorized = false;
    if (std::optional<std::string_view> header = request.Header("authorization")) {
      constexpr std::string_view kScheme = "bearer ";
      if (header->size() > kScheme.size() &&
          absl::EqualsIgnoreCase(ToAbsl(header->substr(0, kScheme.size())), ToAbsl(kScheme))) {
        authorized =
            ConstantTimeEquals(Trim(header->substr(kScheme.size())), options_.bearer_token);
      }
    }
    if (!authorized) {
      HttpResponse response =
          TextResponse(401, "unauthorized: send \"Authorization: Bearer <the cluster token>\"");
      response.headers.emplace_back("WWW-Authenticate", "Bearer");
      return response;
    }
    // Handlers never see the secret (so they cannot log it).
    std::erase_if(request.headers, [](const auto& header) { return header.first == "authorization"; });
  }
  if (request.method != "GET" && request.method != "HEAD") {
    HttpResponse response = TextResponse(
        405, absl::StrCat("method ", Quote(request.method), " is not allowed (GET, HEAD)"));
    response.headers.emplace_back("Allow", "GET, HEAD");
    return response;
  }
  const std::shared_ptr<const HttpHandler> handler = FindRoute(request.path);
  if (handler == nullptr) return TextResponse(404, absl::StrCat("not found: ", Quote(request.path)));
  return (*handler)(request);
}

}  // namespace tessera::metrics
