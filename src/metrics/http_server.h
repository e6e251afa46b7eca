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
// What it does with each connection, in order:
// - Accepting. At most `max_connections` open at once and `max_connections_per_client` from one
//   client address. Past either, the oldest connection of that client (or anyone's, for the
//   total) that is still sending its request head is closed with 408 to make room: a whole head
//   arrives within moments of the connection, so the oldest of those is the slowest. When every
//   one has sent its request (they wait for or get their answers), the new connection is
//   answered at once, 429 (its client's limit) or 503 (the total), and closed.
// - Reading. The accepting thread reads every request head itself, on non-blocking sockets (one
//   epoll loop): the whole head (request line and headers, at most `max_head_bytes`: 431 past
//   it) must arrive within `read_timeout` of the accept, however it trickles in (408 when it
//   does not). A client sending slowly therefore holds a descriptor, never a worker.
// - Checking, on the same thread: the head parses (400, http_request.h); the Host header names
//   this server (421 otherwise; "Host" is required of HTTP/1.1): when bound to a loopback address
//   its name is that address, localhost, 127.0.0.1 or [::1], when bound to one other address
//   that address, and when bound to every address ("", 0.0.0.0, ::) any name, plus
//   `allowed_host_names`; a port, when given, must be this one. So a web page of another origin
//   that a rebinding DNS points here is refused. No request body is accepted (413 for a
//   Content-Length above 0 or a Transfer-Encoding). Then the credential the route asks for
//   (HttpRouteOptions::access): with a bearer token set, "Authorization: Bearer <token>"
//   (compared in constant time), or a live session of `sessions`; 401 with "WWW-Authenticate:
//   Bearer" otherwise, before anything is said about the path (an unknown one is 404 only to
//   those who may ask). The Authorization header is removed before a handler sees the request,
//   and the token is never written to a response or an error. Then the method: GET and HEAD,
//   and POST where the route allows it (405 with "Allow" otherwise).
// - Answering. A request that passed is queued for a worker; past `max_queued_requests`
//   waiting it is answered 503 at once. A worker runs the handler and serializes the response
//   (for HEAD without its body) with Content-Length, Date and "Connection: close"; the accepting
//   thread writes it (non-blocking, within `write_timeout`), shuts the connection down and
//   closes it once the client has closed too (or after a second). One request per connection:
//   Prometheus and browsers open a new one as needed.
// So slow or many clients cost descriptors and a little memory, never a worker: /metrics and
// the dashboard are answered while a flood of slow connections is open.
//
// Threads: the accepting (epoll) thread and `worker_threads` (default 4) that run handlers,
// up to worker_threads at once: handlers must be thread-safe. Errors are one line of
// text/plain.
//
// Threading: thread-safe. Routes may be added while serving. Stop() (and the destructor) stops
// accepting, ends connections in progress and joins every thread; a handler running then
// finishes first.
#pragma once

#include <cstddef>
#include <cstdint>
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
#include "metrics/http_sessions.h"

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

// What a route asks of a request before its handler runs.
enum class HttpAccess {
  kCredential,  // the bearer token or a live session (when a token is set)
  kMetrics,     // as kCredential, or the scrape token (HttpServerOptions::scrape_token)
  kToken,       // the bearer token itself (when a token is set): what mints login tickets
  kPublic,      // nothing (static files, which hold no secret; the ticket exchange)
};

struct HttpRouteOptions {
  HttpAccess access = HttpAccess::kCredential;
  bool allow_post = false;  // POST too (without a body), besides GET and HEAD
};

struct HttpServerOptions {
  // An IP address or host name to bind (the first address it resolves to that binds); ""
  // binds every address.
  std::string host = "127.0.0.1";
  // 0 picks a free port (port() tells which).
  int port = 0;
  // When not empty, every request to a route that is not public must carry "Authorization:
  // Bearer <bearer_token>" (or a live session, below). Visible ASCII without spaces (what the
  // header can carry).
  std::string bearer_token;
  // Where login tickets are redeemed: a live session is a credential as good as the token for
  // HttpAccess::kCredential routes. Null: the token only.
  std::shared_ptr<HttpSessions> sessions;
  // When not empty, a bearer credential good for HttpAccess::kMetrics routes alone (what a
  // scraper is given instead of the token: rpc::DeriveScrapeToken). Visible ASCII.
  std::string scrape_token;
  // Host names (lower case, no port) the Host header may name besides those of the bound
  // address (see above).
  std::vector<std::string> allowed_host_names;
  // Threads running handlers (1..64).
  int worker_threads = 4;
  // Whole requests waiting for a worker; one more is answered 503 at once (1..4096).
  int max_queued_requests = 64;
  // Connections open at once (16..65536), and from one client address (1..max_connections).
  int max_connections = 1024;
  int max_connections_per_client = 32;
  // The request line and headers together, blank line included (1 KiB..1 MiB).
  size_t max_head_bytes = 16 * 1024;
  // From accepting a connection to having its whole request head (the header deadline).
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
  absl::Status Handle(std::string path, HttpHandler handler, HttpRouteOptions route = {})
      ABSL_LOCKS_EXCLUDED(mu_);
  // Routes requests whose path starts with `prefix` ("/dashboard/", "/" for everything) to
  // `handler`, unless an exact route or a longer prefix matches.
  // Both: InvalidArgument unless the path starts with "/"; AlreadyExists when taken.
  absl::Status HandlePrefix(std::string prefix, HttpHandler handler, HttpRouteOptions route = {})
      ABSL_LOCKS_EXCLUDED(mu_);

  // Stops accepting, ends every connection and joins the threads. Idempotent.
  void Stop() ABSL_LOCKS_EXCLUDED(mu_, stop_mu_);

 private:
  struct Route {
    HttpHandler handler;
    HttpRouteOptions options;
  };
  // A request that passed every check, for a worker.
  struct Job {
    uint64_t connection = 0;
    std::shared_ptr<const Route> route;
    HttpRequest request;
  };
  // A worker's answer, for the accepting thread to write.
  struct Answer {
    uint64_t connection = 0;
    std::string bytes;
  };
  struct Connection;
  class Loop;

  HttpServer(HttpServerOptions options, int listener, int port, int epoll_fd, int wake_fd);

  void WorkerLoop() ABSL_LOCKS_EXCLUDED(mu_);
  std::shared_ptr<const Route> FindRoute(const std::string& path) const ABSL_LOCKS_EXCLUDED(mu_);
  enum class RouteKind { kExact, kPrefix };
  absl::Status AddRoute(RouteKind kind, std::string path, HttpHandler handler,
                        HttpRouteOptions route) ABSL_LOCKS_EXCLUDED(mu_);
  // Wakes the accepting thread (an eventfd write).
  void Wake() const;

  const HttpServerOptions options_;
  const int listener_;
  const int port_;
  const int epoll_fd_;
  const int wake_fd_;           // eventfd: Stop and finished answers wake the accepting thread
  std::unique_ptr<Loop> loop_;  // the accepting thread's state (that thread only)
  std::thread accept_thread_;
  std::vector<std::thread> workers_;

  // Held through Stop, so a second caller returns only once the first has finished.
  absl::Mutex stop_mu_;
  bool stopped_ ABSL_GUARDED_BY(stop_mu_) = false;

  mutable absl::Mutex mu_;
  absl::CondVar queued_;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::deque<Job> jobs_ ABSL_GUARDED_BY(mu_);         // oldest first
  std::vector<Answer> answers_ ABSL_GUARDED_BY(mu_);  // written by the accepting thread
  std::map<std::string, std::shared_ptr<const Route>> exact_routes_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, std::shared_ptr<const Route>> prefix_routes_ ABSL_GUARDED_BY(mu_);
};

}  // namespace tessera::metrics
