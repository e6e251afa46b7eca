#include "metrics/http_sessions.h"

#include <sys/random.h>

#include <cerrno>

#include "absl/time/clock.h"
#include "base/string_util.h"

namespace tessera::metrics {
namespace {

constexpr size_t kSecretBytes = 32;

absl::StatusOr<std::string> RandomHex() {
  unsigned char bytes[kSecretBytes];
  size_t got = 0;
  while (got < sizeof(bytes)) {
    const ssize_t n = getrandom(bytes + got, sizeof(bytes) - got, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return absl::InternalError("cannot read random bytes for a login ticket");
    got += static_cast<size_t>(n);
  }
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  out.reserve(2 * sizeof(bytes));
  for (unsigned char b : bytes) {
    out += kHex[b >> 4];
    out += kHex[b & 15];
  }
  return out;
}

template <typename Entries>
void DropExpired(Entries& entries, absl::Time now) {
  std::erase_if(entries, [now](const auto& entry) { return entry.expires <= now; });
}

}  // namespace

absl::StatusOr<std::string> HttpSessions::IssueTicket() {
  absl::StatusOr<std::string> ticket = RandomHex();
  if (!ticket.ok()) return ticket.status();
  const absl::Time now = absl::Now();
  absl::MutexLock lock(&mu_);
  DropExpired(tickets_, now);
  while (tickets_.size() >= options_.max_tickets && !tickets_.empty()) tickets_.pop_front();
  tickets_.push_back({*ticket, now + options_.ticket_lifetime});
  return ticket;
}

absl::StatusOr<std::string> HttpSessions::Redeem(std::string_view ticket) {
  const absl::Time now = absl::Now();
  {
    absl::MutexLock lock(&mu_);
    DropExpired(tickets_, now);
    // Every ticket is compared, whichever matches.
    size_t found = tickets_.size();
    for (size_t i = 0; i < tickets_.size(); ++i) {
      if (ConstantTimeEquals(ticket, tickets_[i].secret)) found = i;
    }
    if (found == tickets_.size()) {
      return absl::PermissionDeniedError("the login ticket is unknown, used or expired");
    }
    tickets_.erase(tickets_.begin() + static_cast<std::ptrdiff_t>(found));
  }
  absl::StatusOr<std::string> session = RandomHex();
  if (!session.ok()) return session.status();
  absl::MutexLock lock(&mu_);
  DropExpired(sessions_, now);
  while (sessions_.size() >= options_.max_sessions && !sessions_.empty()) sessions_.pop_front();
  sessions_.push_back({*session, now + options_.session_lifetime});
  return session;
}

bool HttpSessions::IsSession(std::string_view credential) const {
  const absl::Time now = absl::Now();
  absl::MutexLock lock(&mu_);
  bool found = false;
  for (const Entry& entry : sessions_) {
    found = (ConstantTimeEquals(credential, entry.secret) && entry.expires > now) || found;
  }
  return found;
}

}  // namespace tessera::metrics
