// HttpServer: a small HTTP/1.1 server on POSIX sockets for /metrics, the dashboard's static
// files and its JSON, on the head and every node agent.
//
//   TESSERA_ASSIGN_OR_RETURN(std::unique_ptr<HttpServer> server,
//                            HttpServer::Start({.host = "0.0.0.0", .port = 0, .bearer_token = t}));
//   TESSERA_RETURN_IF_ERROR(server->Handle("/metrics", [&](const HttpRequest&) {
//     return HttpResponse{200, std::string(kPrometheusTextContentType), Render(registry)};
//   }));
//   int port = server->port();
//
// What it does with each connection, in order: reads the request head (request line and
// headers, at most `max_head_bytes`: 431 past it) within `read_timeout` of accepting it (408
// when it runs out); parses it (400, http_request.h); when a bearer token is set, requires
// "Authorization: Bearer <token>" (compared in constant time; 401 with "WWW-Authenticate:
// Bearer" otherwise; the header is removed before a handler sees the request, and the token is
// never written to a response or an error); allows GET and HEAD only (405 with "Allow: GET,
// HEAD"); routes the decoded path to the exact route of that path, else to the longest
// matching prefix route (404 when none); answers the handler's response (for HEAD without its
// body) with Content-Length, Date and "Connection: close", and closes. One request per
// connection: Prometheus and browsers open a new one as needed, and a worker is never held by
// an idle keep-alive client. A request body is never read.
//
// Threads: one accepting thread and `worker_threads` (default 4) that each serve one
// connection at a time; accepted connections wait in a queue of at most
// `max_queued_connections`, past which a new one is answered 503 and closed. So a slow client
// holds one worker for at most read_timeout + write_timeout. Handlers run on the workers, up to
// worker_threads at once: they must be thread-safe. Errors are one line of text/plain.
//
// Threading: thread-safe. Routes may be added while serving. Stop() (and the destructor) stops
// accepting, ends connections in progress and joins every thread; a handler running then
// finishes first.
#pragma once

#include <cstddef>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "metrics/http_request.h"

namespace tessera::metrics {

struct HttpResponse {
  int status = 200;
  std::string content_type = "text/plain; charset=utf-8";
  std::string body;
  // More headers (name, value); Content-Length, Content-Type, Date and Connection are the
  // server's. A name that is not a token or a value with a control character makes the
  // response a 500.
  std::vector<std::pair<std::string, std::string>> headers;
};

// A one-line text/plain response: "<message>\n".
HttpResponse TextResponse(int status, std::string_view message);

using HttpHandler = std::function<HttpResponse(const HttpRequest&)>;

struct HttpServerOptions {
  // An IP address or host name to bind (the first address it resolves to that binds); ""
  // binds every address.
  std::string host = "127.0.0.1";
  // 0 picks a free port (port() tells which).
  int port = 0;
  // When not empty, every request must carry "Authorization: Bearer <bearer_token>". Visible
  // ASCII without spaces (what the header can carry).
  std::string bearer_token;
  // Threads serving connections, one connection each at a time (1..64).
  int worker_threads = 4;
  // Accepted connections waiting for a worker; one more is answered 503 (1..4096).
  int max_queued_connections = 64;
  // The request line and headers together, blank line included (1 KiB..1 MiB).
  size_t max_head_bytes = 16 * 1024;
  // From accepting a connection to having its whole request head.
  absl::Duration read_timeout = absl::Seconds(5);
  // For writing the whole response.
  absl::Duration write_timeout = absl::Seconds(10);
  // After sending a response body of at least this many bytes (0: never), the worker gives the
  // heap memory freed since back to the system (glibc's malloc_trim). Building a large answer
  // (a JSON list of 1,000 nodes) peaks at many times its size in small blocks, spread over each
  // worker thread's malloc arena; without this, that peak stays resident for good.
  size_t release_memory_after_bytes = 0;
};

class HttpServer {
 public:
  // Binds, listens and starts the threads. InvalidArgument naming the option out of range;
  // Unavailable (with the system's reason) when the address cannot be resolved or bound.
  static absl::StatusOr<std::unique_ptr<HttpServer>> Start(HttpServerOptions options);
  ~HttpServer();  // Stop()
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  int port() const { return port_; }

  // Routes requests for exactly `path` ("/metrics") to `handler`.
  absl::Status Handle(std::string path, HttpHandler handler) ABSL_LOCKS_EXCLUDED(mu_);
  // Routes requests whose path starts with `prefix` ("/dashboard/", "/" for everything) to
  // `handler`, unless an exact route or a longer prefix matches.
  // Both: InvalidArgument unless the path starts with "/"; AlreadyExists when taken.
  absl::Status HandlePrefix(std::string prefix, HttpHandler handler) ABSL_LOCKS_EXCLUDED(mu_);

  // Stops accepting, ends every connection and joins the threads. Idempotent.
  void Stop() ABSL_LOCKS_EXCLUDED(mu_, stop_mu_);

 private:
  HttpServer(HttpServerOptions options, int listener, int port, int wake_read, int wake_write);

  void AcceptLoop() ABSL_LOCKS_EXCLUDED(mu_);
  void WorkerLoop() ABSL_LOCKS_EXCLUDED(mu_);
  // Reads one request from `fd`, answers it and closes `fd`.
  void Serve(int fd) ABSL_LOCKS_EXCLUDED(mu_);
  HttpResponse Respond(HttpRequest& request) ABSL_LOCKS_EXCLUDED(mu_);
  std::shared_ptr<const HttpHandler> FindRoute(const std::string& path) const
      ABSL_LOCKS_EXCLUDED(mu_);
  enum class RouteKind { kExact, kPrefix };
  absl::Status AddRoute(RouteKind kind, std::string path, HttpHandler handler)
      ABSL_LOCKS_EXCLUDED(mu_);

  const HttpServerOptions options_;
  const int listener_;
  const int port_;
  // A pipe written once by Stop: every poll() watches its read end, so all threads wake.
  const int wake_read_;
  const int wake_write_;
  std::thread accept_thread_;
  std::vector<std::thread> workers_;

  // Held through Stop, so a second caller returns only once the first has finished.
  absl::Mutex stop_mu_;
  bool stopped_ ABSL_GUARDED_BY(stop_mu_) = false;

  mutable absl::Mutex mu_;
  absl::CondVar queued_;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::deque<int> queue_ ABSL_GUARDED_BY(mu_);  // accepted connections' fds, oldest first
  std::map<std::string, std::shared_ptr<const HttpHandler>> exact_routes_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, std::shared_ptr<const HttpHandler>> prefix_routes_ ABSL_GUARDED_BY(mu_);
};

}  // namespace tessera::metrics
