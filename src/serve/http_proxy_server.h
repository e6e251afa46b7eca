// HttpProxyServer: the serve proxy's HTTP/1.1 server (keep-alive, request bodies, streamed
// responses), a public endpoint like Ray Serve's: no credentials are asked for.
//
//   auto server = HttpProxyServer::Start({.host = "0.0.0.0", .port = 8000},
//       [&](ProxyRequest request, std::shared_ptr<ResponseWriter> writer) {
//         router.Assign(std::move(request), std::move(writer));  // returns at once
//       });
//   ...later, on any thread:
//   writer->Start(200, {{"content-type", "text/event-stream"}}, ResponseMode::kStreaming);
//   writer->Write("data: 1\n\n");
//   writer->Finish();
//
// Threading. One loop thread owns every socket (non-blocking, level-triggered epoll): it
// accepts, reads and parses requests (http_stream.h), calls the handler, writes responses and
// keeps the timers. The handler runs on that thread, so it must not block: it hands the
// request on and returns. A ResponseWriter is thread-safe and used from any thread, later: its
// calls only queue bytes under the writer's own mutex and wake the loop (an eventfd, once per
// batch of calls), which frames and writes them. OnClientGone and OnWritable callbacks run on
// the loop thread (on the thread calling Stop, for those Stop causes), with no lock held; they
// must not block either, and must not call Stop.
//
// Connections. Requests on one connection are answered in order: the handler sees a
// pipelined request only once the response before it is finished (Finish or a kComplete
// Start), and bytes read past a request wait until then. An idle connection closes after
// keep_alive_timeout; a request head must be whole within head_read_timeout of its first byte
// (408 otherwise: a slow client holds a descriptor, never the loop); a body that stops
// arriving for keep_alive_timeout is answered 408; a client that takes no response bytes for
// keep_alive_timeout while some are waiting is treated as gone. Malformed requests are
// answered with the parser's status (400, 413, 431, 501, 505) and the connection closes.
// Past max_connections a new connection is answered 503 and closed. "Expect: 100-continue"
// is answered "100 Continue" before the body is read. A response to HEAD has no body, nor
// do 204 and 304. Every response carries X-Request-ID and Date (unless the handler set them).
//
// Request timeout (request_timeout, end to end from the head's arrival): when no response
// byte has gone out yet, the client gets 408 "Request <id> timed out after <t>s."; when some
// have, the connection is closed. Either way the writer's OnClientGone callbacks run: that is
// how the request is cancelled.
//
// Backpressure. Write never blocks and never drops a byte while the client is there: a slow
// reader's bytes are buffered. Once a connection's unsent bytes pass max_buffered_bytes,
// WouldBuffer() says true: a producer stops producing and asks OnWritable(callback), which
// runs when the unsent bytes fall to half the limit (or the exchange ends). So memory per
// connection stays near max_buffered_bytes plus what one producer step adds.
//
// Costs. Per connection: a descriptor, the parser (at most max_head_bytes of head and
// max_body_bytes of body while a request arrives: bodies are handed over whole), up to 64 KiB
// of pipelined input, and the unsent output. Per request: one handler call, one writer
// (a mutex and a few strings). Per Write: one copy of the bytes into the writer, moved to the
// socket's queue and written with writev; chunk framing adds two small strings.
//
// Timers read the injected Clock (options.clock). epoll_wait sleeps until the earliest
// deadline as that clock reckons it; with a FakeClock, a test moves the clock and calls
// Wake() for the loop to look again.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "base/clock.h"
#include "metrics/http_request.h"
#include "serve/http_stream.h"

namespace tessera::serve {

struct HttpProxyServerOptions {
  // An IP address or host name to bind (the first address it resolves to that binds); ""
  // binds every address (IPv6 and IPv4 where the host has both).
  std::string host = "127.0.0.1";
  // 0 picks a free port (port() tells which).
  int port = 0;
  // An idle keep-alive connection closes after this long (Ray's keep_alive_timeout_s).
  absl::Duration keep_alive_timeout = absl::Seconds(90);
  // A request head must be whole this long after its first byte; 408 otherwise.
  absl::Duration head_read_timeout = absl::Seconds(10);
  // End to end from a request head's arrival (Ray's request_timeout_s); none when unset.
  std::optional<absl::Duration> request_timeout;
  // The request line and headers, blank line included (1 KiB..1 MiB): 431 past it.
  size_t max_head_bytes = 16 * 1024;
  // Header lines of one request (1..10000): 431 past it.
  size_t max_header_count = 100;
  // A request's body (0..1 GiB): 413 past it.
  size_t max_body_bytes = 100 * 1024 * 1024;
  // Connections open at once (1..1000000): one more is answered 503 and closed.
  int max_connections = 4096;
  // A connection's unsent response bytes past which WouldBuffer() says true (64 KiB..1 GiB).
  size_t max_buffered_bytes = 8 * 1024 * 1024;
  // Where time comes from; Clock::Real() when null. Not owned; outlives the server.
  Clock* clock = nullptr;
};

// What the handler gets for each request.
struct ProxyRequest {
  metrics::HttpRequest head;  // header names lower-case
  std::string body;           // chunked bodies decoded
  // The x-request-id header, or a random 128-bit number in 32 hex digits.
  std::string request_id;
  std::string client_address;  // "127.0.0.1", "::1"
  int client_port = 0;
};

enum class ResponseMode {
  kComplete,   // Start's body is the whole body (Content-Length); no Write or Finish follows
  kStreaming,  // Start's body is the first bytes, Write adds more, Finish ends it: chunked on
               // HTTP/1.1; on HTTP/1.0 raw bytes, and the connection closes at the end
};

class ProxyHub;
class ProxyLoop;

// The response to one request, written from any thread (thread-safe). Calls queue bytes for
// the loop thread and return at once; none blocks.
class ResponseWriter {
 public:
  ResponseWriter(const ResponseWriter&) = delete;
  ResponseWriter& operator=(const ResponseWriter&) = delete;

  // Sends the status line and `headers`, then `body` (see ResponseMode). Content-Length,
  // Transfer-Encoding, Connection and Keep-Alive are the server's: a handler's are dropped
  // (for HEAD, a handler's Content-Length is kept: it says what GET would send).
  // InvalidArgument for a status outside 200..599 or a header that is not one (nothing is
  // sent); FailedPrecondition when started or failed already; Cancelled once the exchange has
  // ended (the client went away, the request timed out, the server stopped).
  absl::Status Start(int status, HttpHeaders headers, ResponseMode mode, std::string body = {})
      ABSL_LOCKS_EXCLUDED(mu_);
  // More body bytes of a kStreaming response (empty ones are ignored). FailedPrecondition
  // before Start, for kComplete and after Finish; Cancelled once the exchange has ended.
  absl::Status Write(std::string_view bytes) ABSL_LOCKS_EXCLUDED(mu_);
  // Ends a kStreaming response. Errors as Write's.
  absl::Status Finish() ABSL_LOCKS_EXCLUDED(mu_);
  // Gives up: before any response byte went out the client gets 500; after, the connection
  // is reset (the client sees a broken response, never a short one that looks whole). Nothing
  // once finished or ended.
  void Fail() ABSL_LOCKS_EXCLUDED(mu_);

  bool started() const ABSL_LOCKS_EXCLUDED(mu_);
  // True while this connection's unsent bytes are past max_buffered_bytes (never once the
  // exchange has ended): a producer should wait for OnWritable before writing more.
  bool WouldBuffer() const ABSL_LOCKS_EXCLUDED(mu_);
  // Runs `callback` once the unsent bytes fall to half of max_buffered_bytes or the exchange
  // ends; at once, on this thread, when WouldBuffer() is false now.
  void OnWritable(std::function<void()> callback) ABSL_LOCKS_EXCLUDED(mu_);
  // Runs `callback` once if the client goes away before the response is finished: its
  // connection's read side ends or breaks, a write to it fails, it takes no bytes for
  // keep_alive_timeout, the request times out, or the server stops. At once, on this thread,
  // when that has happened already; never when the response finished first. Each callback
  // registered runs.
  void OnClientGone(std::function<void()> callback) ABSL_LOCKS_EXCLUDED(mu_);

  const std::string& request_id() const { return request_id_; }

 private:
  friend class ProxyLoop;
  using Callbacks = std::vector<std::function<void()>>;
  struct PendingHead {
    int status = 200;
    HttpHeaders headers;
    ResponseMode mode = ResponseMode::kComplete;
  };
  // What the writer's calls queued since the loop last looked, in this order.
  struct Ops {
    std::optional<PendingHead> head;
    std::string body;
    bool finish = false;
    bool fail = false;
  };

  ResponseWriter(std::shared_ptr<ProxyHub> hub, uint64_t connection, std::string request_id,
                 size_t buffer_limit);

  // For the loop thread.
  Ops TakeOps() ABSL_LOCKS_EXCLUDED(mu_);
  // The exchange is over (normally or not): later calls are refused. Returns the callbacks to
  // run: the OnClientGone ones unless the response had finished, and the OnWritable ones.
  Callbacks End() ABSL_LOCKS_EXCLUDED(mu_);
  // Records the connection's unsent bytes; returns the OnWritable callbacks due.
  Callbacks SetUnsent(size_t bytes) ABSL_LOCKS_EXCLUDED(mu_);

  // Error for a call made after the exchange ended or finished, or before Start.
  absl::Status Refusal(std::string_view call) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Marks this writer as having work for the loop; true when the loop must be told.
  bool MarkScheduled() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  size_t BufferedLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const std::shared_ptr<ProxyHub> hub_;
  const uint64_t connection_;
  const std::string request_id_;
  const size_t buffer_limit_;

  mutable absl::Mutex mu_;
  bool started_ ABSL_GUARDED_BY(mu_) = false;
  bool finished_ ABSL_GUARDED_BY(mu_) = false;  // Finish, Fail or a kComplete Start
  bool ended_ ABSL_GUARDED_BY(mu_) = false;     // the loop is done with this exchange
  bool gone_ ABSL_GUARDED_BY(mu_) = false;      // the client went away before the finish
  bool scheduled_ ABSL_GUARDED_BY(mu_) = false;
  Ops pending_ ABSL_GUARDED_BY(mu_);
  size_t unsent_ ABSL_GUARDED_BY(mu_) = 0;  // in the connection's output queue
  Callbacks gone_callbacks_ ABSL_GUARDED_BY(mu_);
  Callbacks writable_callbacks_ ABSL_GUARDED_BY(mu_);
};

// Called on the loop thread for each request; must not block.
using ProxyHandler =
    std::function<void(ProxyRequest request, std::shared_ptr<ResponseWriter> writer)>;

// Counters the proxy exports; a snapshot.
struct HttpProxyServerStats {
  int64_t connections_open = 0;
  int64_t connections_accepted = 0;  // ever
  int64_t connections_refused = 0;   // answered 503 past max_connections
  int64_t requests = 0;              // handed to the handler
  int64_t responses_completed = 0;   // requests whose response finished (its bytes queued)
  int64_t bytes_received = 0;
  // Every response status sent, the handler's and the server's own (400, 408, 413, 431, 500,
  // 501, 503, 505).
  std::map<int, int64_t> responses_by_status;
};

class HttpProxyServer {
 public:
  // Binds, listens and starts the loop thread. InvalidArgument naming an option out of range
  // or an empty handler; Unavailable (with the system's reason) when the address cannot be
  // resolved or bound.
  static absl::StatusOr<std::unique_ptr<HttpProxyServer>> Start(HttpProxyServerOptions options,
                                                                ProxyHandler handler);
  ~HttpProxyServer();  // Stop()
  HttpProxyServer(const HttpProxyServer&) = delete;
  HttpProxyServer& operator=(const HttpProxyServer&) = delete;

  int port() const { return port_; }
  HttpProxyServerStats stats() const;
  // Blocks until `condition` holds for the counters (true), or options.clock reaches now +
  // `timeout` (false): for a draining proxy waiting for its connections to close, and for tests
  // that need the loop to have seen something.
  bool AwaitStats(const std::function<bool(const HttpProxyServerStats&)>& condition,
                  absl::Duration timeout) const;
  // Makes the loop read the clock again (after a FakeClock moved) and look for work.
  void Wake();
  // Stops accepting, closes every connection (the OnClientGone callbacks of requests in flight
  // run, on this thread) and joins the loop thread. Idempotent; no handler runs after it.
  void Stop() ABSL_LOCKS_EXCLUDED(stop_mu_);

 private:
  HttpProxyServer(HttpProxyServerOptions options, int listener, int port, int epoll_fd,
                  std::shared_ptr<ProxyHub> hub);

  const HttpProxyServerOptions options_;
  const int listener_;
  const int port_;
  const int epoll_fd_;
  const std::shared_ptr<ProxyHub> hub_;  // shared with every writer
  std::unique_ptr<ProxyLoop> loop_;      // the loop thread's state
  std::thread thread_;

  // Held through Stop, so a second caller returns only once the first has finished.
  absl::Mutex stop_mu_;
  bool stopped_ ABSL_GUARDED_BY(stop_mu_) = false;
};

}  // namespace tessera::serve
