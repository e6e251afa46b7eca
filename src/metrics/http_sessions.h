// HttpSessions: short-lived one-time login tickets and the sessions they open, so that a browser
// can use an HTTP endpoint that asks for the cluster token without ever holding the token.
//
//   auto sessions = std::make_shared<HttpSessions>();
//   std::string ticket = *sessions->IssueTicket();        // for a caller that proved the token
//   std::string session = *sessions->Redeem(ticket);       // once, within the ticket's lifetime
//   sessions->IsSession(session);                          // true until it expires
//
// Tickets and sessions are 32 random bytes (getrandom), hex encoded. A ticket is good for one
// Redeem within `ticket_lifetime`; a session for `session_lifetime` from its opening. Past
// `max_tickets` or `max_sessions` the oldest is dropped, so the tables never grow beyond them.
// Every comparison takes time that depends only on the lengths (all entries are compared).
// HttpServer accepts a live session as a bearer credential where it accepts the token
// (HttpServerOptions::sessions).
//
// Threading: thread-safe (one mutex). Cost: O(max_sessions) per IsSession.
#pragma once

#include <cstddef>
#include <deque>
#include <string>
#include <string_view>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace tessera::metrics {

struct HttpSessionsOptions {
  absl::Duration ticket_lifetime = absl::Seconds(60);
  absl::Duration session_lifetime = absl::Hours(12);
  size_t max_tickets = 16;
  size_t max_sessions = 64;
};

class HttpSessions {
 public:
  explicit HttpSessions(HttpSessionsOptions options = {}) : options_(options) {}

  // A new ticket. Internal when the system gives no random bytes.
  absl::StatusOr<std::string> IssueTicket() ABSL_LOCKS_EXCLUDED(mu_);
  // Spends `ticket` and opens a session. PermissionDenied ("the login ticket is unknown, used or
  // expired") otherwise; which of the three is not said.
  absl::StatusOr<std::string> Redeem(std::string_view ticket) ABSL_LOCKS_EXCLUDED(mu_);
  // Whether `credential` is a live session.
  bool IsSession(std::string_view credential) const ABSL_LOCKS_EXCLUDED(mu_);

  const HttpSessionsOptions& options() const { return options_; }

 private:
  struct Entry {
    std::string secret;
    absl::Time expires;
  };

  const HttpSessionsOptions options_;
  mutable absl::Mutex mu_;
  std::deque<Entry> tickets_ ABSL_GUARDED_BY(mu_);   // oldest first
  std::deque<Entry> sessions_ ABSL_GUARDED_BY(mu_);  // oldest first
};

}  // namespace tessera::metrics
