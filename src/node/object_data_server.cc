#include "node/object_data_server.h"

#include <poll.h>
#include <sys/eventfd.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <optional>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/string_util.h"
#include "node/object_data_protocol.h"
#include "objects/object_store_server.h"

namespace tessera {
namespace {

absl::StatusOr<std::string> RandomTicket() {
  std::string ticket(kDataTicketBytes, '\0');
  size_t got = 0;
  while (got < ticket.size()) {
    ssize_t n = ::getrandom(ticket.data() + got, ticket.size() - got, 0);
    if (n < 0) {
      if (errno == EINTR) continue;
      return absl::InternalError(absl::StrCat("getrandom: ", std::strerror(errno)));
    }
    got += static_cast<size_t>(n);
  }
  return ticket;
}

constexpr absl::Duration kRequestTimeout = absl::Seconds(30);

void Wake(int fd) {
  const uint64_t one = 1;
  (void)!::write(fd, &one, sizeof(one));
}

}  // namespace

absl::StatusOr<std::unique_ptr<ObjectDataServer>> ObjectDataServer::Start(
    LocalObjectStore local, ObjectDataServerOptions options) {
  auto listener = ListenTcp(options.bind_address);
  if (!listener.ok()) return listener.status();
  auto port = LocalPort(listener->get());
  if (!port.ok()) return port.status();
  UniqueFd wake(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
  if (wake.get() < 0) return absl::InternalError(absl::StrCat("eventfd: ", std::strerror(errno)));
  std::unique_ptr<ObjectDataServer> server(new ObjectDataServer(
      local, std::move(options), std::move(*listener), *port, std::move(wake)));
  server->acceptor_ = std::thread([s = server.get()] { s->AcceptLoop(); });
  return server;
}

ObjectDataServer::ObjectDataServer(LocalObjectStore local, ObjectDataServerOptions options,
                                   UniqueFd listener, int port, UniqueFd wake)
    : local_(local),
      options_(std::move(options)),
      listener_(std::move(listener)),
      port_(port),
      wake_(std::move(wake)) {}

ObjectDataServer::~ObjectDataServer() { Stop(); }

absl::StatusOr<ObjectOffer> ObjectDataServer::OfferObject(const ObjectId& id) {
  auto ticket = RandomTicket();
  if (!ticket.ok()) return ticket.status();
  auto location = local_.store->Get(kLocalStoreClient, id);
  if (!location.ok()) return location.status();
  {
    absl::MutexLock lock(&mu_);
    if (stopping_) {
      (void)local_.store->Release(kLocalStoreClient, id);
      return absl::UnavailableError("the node agent is shutting down");
    }
    pending_[*ticket] = Pending{id, *location, absl::Now() + options_.ticket_lifetime};
  }
  Wake(wake_.get());
  return ObjectOffer{*std::move(ticket), location->data_size, location->metadata};
}

size_t ObjectDataServer::pending_offers() const {
  absl::MutexLock lock(&mu_);
  return pending_.size();
}

absl::Time ObjectDataServer::ExpireLocked(absl::Time now) {
  absl::Time next = absl::InfiniteFuture();
  for (auto it = pending_.begin(); it != pending_.end();) {
    if (it->second.expires <= now || stopping_) {
      (void)local_.store->Release(kLocalStoreClient, it->second.id);
      pending_.erase(it++);
    } else {
      next = std::min(next, it->second.expires);
      ++it;
    }
  }
  return next;
}

void ObjectDataServer::JoinFinishedLocked() {
  for (auto it = connections_.begin(); it != connections_.end();) {
    if (it->done) {
      it->thread.join();
      it = connections_.erase(it);
    } else {
      ++it;
    }
  }
}

void ObjectDataServer::AcceptLoop() {
  while (true) {
    int timeout_ms = -1;
    {
      absl::MutexLock lock(&mu_);
      if (stopping_) return;
      JoinFinishedLocked();
      const absl::Time now = absl::Now();
      const absl::Time next = ExpireLocked(now);
      if (next != absl::InfiniteFuture()) {
        timeout_ms = static_cast<int>(
            std::min<int64_t>(absl::ToInt64Milliseconds(next - now) + 1, 60'000));
      }
    }
    pollfd fds[2] = {{listener_.get(), POLLIN, 0}, {wake_.get(), POLLIN, 0}};
    if (::poll(fds, 2, timeout_ms) < 0 && errno != EINTR) return;
    if (fds[1].revents & POLLIN) {
      uint64_t count;
      (void)!::read(wake_.get(), &count, sizeof(count));
    }
    if (!(fds[0].revents & POLLIN)) continue;
    UniqueFd fd(::accept4(listener_.get(), nullptr, nullptr, SOCK_CLOEXEC));
    if (fd.get() < 0) continue;
    absl::MutexLock lock(&mu_);
    if (stopping_) return;
    Connection& connection = connections_.emplace_back();
    connection.fd = std::move(fd);
    connection.thread = std::thread([this, c = &connection] { Serve(c); });
  }
}

void ObjectDataServer::Serve(Connection* connection) {
  const int fd = connection->fd.get();
  const absl::Time deadline = absl::Now() + options_.transfer_timeout;
  auto finish = [&] {
    absl::MutexLock lock(&mu_);
    connection->done = true;
  };
  auto refuse = [&](absl::StatusCode code, std::string_view message) {
    std::string reply = EncodeDataReply(code, 0, message);
    (void)WriteAll(fd, reply.data(), reply.size(), deadline);
    finish();
  };
  std::string bytes(kDataRequestBytes, '\0');
  // A connection that never sends its request holds a thread only briefly.
  auto got = ReadUpTo(fd, bytes.data(), bytes.size(),
                      std::min(deadline, absl::Now() + kRequestTimeout));
  if (!got.ok()) return finish();
  bytes.resize(*got);
  auto request = ParseDataRequest(bytes);
  if (!request.ok()) return refuse(request.status().code(), ToStd(request.status().message()));
  std::optional<Pending> offer;
  {
    absl::MutexLock lock(&mu_);
    auto it = pending_.find(request->ticket);
    if (it != pending_.end()) {
      offer = it->second;
      pending_.erase(it);
    }
  }
  if (!offer.has_value()) {
    return refuse(absl::StatusCode::kUnauthenticated, "unknown or used data ticket");
  }
  if (request->action == DataAction::kSend) {
    std::string header = EncodeDataReply(absl::StatusCode::kOk, offer->location.data_size, "");
    if (WriteAll(fd, header.data(), header.size(), deadline).ok()) {
      // Written from the mapping: one copy into the socket. sendfile (a splice of the memfd's
      // pages) measured 20-30 % slower on loopback here (docs/benchmarks.md).
      local_.arena->PopulateForRead(offer->location.offset, offer->location.data_size);
      (void)WriteAll(fd, local_.arena->base() + offer->location.offset,
                     offer->location.data_size, deadline);
    }
  }
  (void)local_.store->Release(kLocalStoreClient, offer->id);
  ::shutdown(fd, SHUT_WR);
  finish();
}

void ObjectDataServer::Stop() {
  {
    absl::MutexLock lock(&mu_);
    if (stopping_) return;
    stopping_ = true;
    // Unblocks every connection's send or recv; each then releases its pin.
    for (Connection& connection : connections_) ::shutdown(connection.fd.get(), SHUT_RDWR);
  }
  Wake(wake_.get());
  if (acceptor_.joinable()) acceptor_.join();
  std::list<Connection> connections;
  {
    absl::MutexLock lock(&mu_);
    connections.swap(connections_);
  }
  for (Connection& connection : connections) connection.thread.join();
  absl::MutexLock lock(&mu_);
  ExpireLocked(absl::Now());
}

}  // namespace tessera
