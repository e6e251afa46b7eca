#include "node/object_data_server.h"

#include <fcntl.h>
#include <sys/epoll.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <span>
#include <utility>

#include "absl/strings/str_cat.h"
#include "base/ignore_status.h"
#include "base/string_util.h"
#include "node/object_data_cipher.h"
#include "objects/object_store_server.h"

namespace tessera {
namespace {

// epoll keys: the wake eventfd, the listener, then one serial per accepted connection (serials
// are never reused, so a stale deadline can never name a newer connection on the same fd).
constexpr uint64_t kWakeKey = 0;
constexpr uint64_t kListenerKey = 1;
constexpr uint64_t kFirstConnectionKey = 2;

// How long the listener is left alone after accept failed for lack of descriptors or memory
// (it stays readable, and would otherwise spin the loop).
constexpr absl::Duration kAcceptPause = absl::Milliseconds(100);
// How much of a closing connection's unread input is discarded, at most.
constexpr size_t kMaxDrainBytes = 64 << 10;

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

absl::Status SetNonBlocking(int fd, bool non_blocking) {
  const int flags = ::fcntl(fd, F_GETFL);
  if (flags < 0) return absl::InternalError(absl::StrCat("fcntl: ", std::strerror(errno)));
  const int wanted = non_blocking ? (flags | O_NONBLOCK) : (flags & ~O_NONBLOCK);
  if (wanted != flags && ::fcntl(fd, F_SETFL, wanted) != 0) {
    return absl::InternalError(absl::StrCat("fcntl: ", std::strerror(errno)));
  }
  return absl::OkStatus();
}

// epoll_wait's timeout for a wake-up at `next`: rounded up, so the loop never wakes early and
// spins; at most a minute.
int TimeoutMs(absl::Time next, absl::Time now) {
  if (next == absl::InfiniteFuture()) return -1;
  if (next <= now) return 0;
  return static_cast<int>(std::min<int64_t>(absl::ToInt64Milliseconds(next - now) + 1, 60'000));
}

// Writes a refusal without blocking: a reply header and a one-line message always fit the
// buffer of a socket nothing else was written to. Best effort: a peer that is gone gets nothing.
void SendReplyWithoutBlocking(int fd, absl::StatusCode code, std::string_view message) {
  const std::string reply = EncodeDataReply(code, 0, message);
  (void)::send(fd, reply.data(), reply.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
}

// Ends our side, discards what the peer sent beyond its request (closing with unread input
// would reset the connection, which can destroy the reply still in flight), and closes.
void CloseGracefully(UniqueFd fd) {
  ::shutdown(fd.get(), SHUT_WR);
  char discard[4096];
  size_t drained = 0;
  while (drained < kMaxDrainBytes) {
    const ssize_t n = ::recv(fd.get(), discard, sizeof(discard), MSG_DONTWAIT);
    if (n > 0) {
      drained += static_cast<size_t>(n);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    break;  // nothing more now, end of stream, or an error
  }
}

absl::Status PositiveDuration(absl::Duration d, std::string_view name) {
  if (d > absl::ZeroDuration()) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat("ObjectDataServerOptions.", ToAbsl(name),
                                                 " must be positive, got ",
                                                 absl::FormatDuration(d)));
}

absl::Status CheckOptions(const ObjectDataServerOptions& options) {
  if (options.transfer_threads < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("ObjectDataServerOptions.transfer_threads must be at least 1, got ",
                     options.transfer_threads));
  }
  if (options.max_connections < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("ObjectDataServerOptions.max_connections must be at least 1, got ",
                     options.max_connections));
  }
  if (absl::Status s = PositiveDuration(options.ticket_lifetime, "ticket_lifetime"); !s.ok()) {
    return s;
  }
  if (absl::Status s = PositiveDuration(options.request_timeout, "request_timeout"); !s.ok()) {
    return s;
  }
  return PositiveDuration(options.transfer_timeout, "transfer_timeout");
}

}  // namespace

absl::StatusOr<std::unique_ptr<ObjectDataServer>> ObjectDataServer::Start(
    LocalObjectStore local, ObjectDataServerOptions options) {
  if (absl::Status s = CheckOptions(options); !s.ok()) return s;
  auto listener = ListenTcp(options.bind_address);
  if (!listener.ok()) return listener.status();
  auto port = LocalPort(listener->get());
  if (!port.ok()) return port.status();
  if (absl::Status s = SetNonBlocking(listener->get(), true); !s.ok()) return s;
  // A burst of connects up to the connection limit waits in the kernel's queue for the loop
  // instead of losing SYNs (a second's retry each). Listening again only resizes the queue.
  if (::listen(listener->get(), options.max_connections) != 0) {
    return absl::InternalError(absl::StrCat("listen: ", std::strerror(errno)));
  }
  auto loop = CreateWakeableEpoll(kWakeKey);
  if (!loop.ok()) return loop.status();
  epoll_event event = {};
  event.events = EPOLLIN;
  event.data.u64 = kListenerKey;
  if (::epoll_ctl(loop->epoll.get(), EPOLL_CTL_ADD, listener->get(), &event) != 0) {
    return absl::InternalError(absl::StrCat("epoll_ctl: ", std::strerror(errno)));
  }
  std::unique_ptr<ObjectDataServer> server(new ObjectDataServer(
      local, std::move(options), std::move(*listener), *port, *std::move(loop)));
  server->event_thread_ = std::thread([s = server.get()] { s->EventLoop(); });
  for (int i = 0; i < server->options_.transfer_threads; ++i) {
    server->sender_threads_.emplace_back([s = server.get()] { s->SenderLoop(); });
  }
  return server;
}

ObjectDataServer::ObjectDataServer(LocalObjectStore local, ObjectDataServerOptions options,
                                   UniqueFd listener, int port, WakeableEpoll loop)
    : local_(local),
      options_(std::move(options)),
      listener_(std::move(listener)),
      port_(port),
      loop_(std::move(loop)) {}

ObjectDataServer::~ObjectDataServer() { Stop(); }

absl::StatusOr<ObjectOffer> ObjectDataServer::OfferObject(const ObjectId& id) {
  auto ticket = RandomTicket();
  if (!ticket.ok()) return ticket.status();
  auto key = NewTransferKey();
  if (!key.ok()) return key.status();
  auto location = local_.store->Get(kLocalStoreClient, id);
  if (!location.ok()) return location.status();
  {
    absl::MutexLock lock(&mu_);
    if (stopping_) {
      IgnoreStatus(local_.store->Release(kLocalStoreClient, id),
                   "cannot fail: this server's Get pinned it for this client");
      return absl::UnavailableError("the node agent is shutting down");
    }
    pending_[*ticket] = Pending{id, *location, *key, absl::Now() + options_.ticket_lifetime};
  }
  WakeEventFd(loop_.wake.get());  // the loop's next expiry may now be sooner
  return ObjectOffer{*std::move(ticket), *std::move(key), location->data_size, location->metadata};
}

size_t ObjectDataServer::pending_offers() const {
  absl::MutexLock lock(&mu_);
  return pending_.size();
}

int ObjectDataServer::open_connections() const {
  absl::MutexLock lock(&mu_);
  return open_connections_;
}

absl::Time ObjectDataServer::ExpireLocked(absl::Time now) {
  absl::Time next = absl::InfiniteFuture();
  for (auto it = pending_.begin(); it != pending_.end();) {
    if (it->second.expires <= now || stopping_) {
      IgnoreStatus(local_.store->Release(kLocalStoreClient, it->second.id),
                   "cannot fail: this server's Get pinned it for this client");
      pending_.erase(it++);
    } else {
      next = std::min(next, it->second.expires);
      ++it;
    }
  }
  return next;
}

void ObjectDataServer::EventLoop() {
  bool listening = true;
  absl::Time accept_resumes = absl::InfinitePast();
  epoll_event events[64];
  while (true) {
    absl::Time now = absl::Now();
    absl::Time next;
    {
      absl::MutexLock lock(&mu_);
      if (stopping_) break;
      next = ExpireLocked(now);
    }
    // Connections that sent no whole request in time.
    while (!request_deadlines_.empty() && request_deadlines_.front().first <= now) {
      auto it = incoming_.find(request_deadlines_.front().second);
      request_deadlines_.pop_front();
      if (it == incoming_.end()) continue;  // its request came in time
      UniqueFd fd = std::move(it->second.fd);
      incoming_.erase(it);
      Refuse(std::move(fd), absl::StatusCode::kDeadlineExceeded,
             absl::StrCat("no whole data request within ",
                          absl::FormatDuration(options_.request_timeout), " of connecting"));
    }
    if (!request_deadlines_.empty()) next = std::min(next, request_deadlines_.front().first);
    if (!listening) {
      if (now >= accept_resumes) {
        epoll_event event = {};
        event.events = EPOLLIN;
        event.data.u64 = kListenerKey;
        if (::epoll_ctl(loop_.epoll.get(), EPOLL_CTL_MOD, listener_.get(), &event) == 0) {
          listening = true;
        }
      }
      if (!listening) next = std::min(next, accept_resumes);
    }

    const int n = ::epoll_wait(loop_.epoll.get(), events, 64, TimeoutMs(next, now));
    if (n < 0 && errno != EINTR) ::abort();  // impossible for a valid epoll fd
    now = absl::Now();
    for (int i = 0; i < n; ++i) {
      const uint64_t key = events[i].data.u64;
      if (key == kWakeKey) {
        DrainEventFd(loop_.wake.get());
      } else if (key == kListenerKey) {
        if (!AcceptWaiting(now)) {
          epoll_event event = {};  // no events: the listener rests until accept_resumes
          event.data.u64 = kListenerKey;
          (void)::epoll_ctl(loop_.epoll.get(), EPOLL_CTL_MOD, listener_.get(), &event);
          listening = false;
          accept_resumes = now + kAcceptPause;
        }
      } else {
        ReadRequest(key);
      }
    }
  }
  // Stopping: connections still in their request phase are simply closed.
  for (auto& [serial, incoming] : incoming_) incoming.fd.Reset();
  absl::MutexLock lock(&mu_);
  open_connections_ -= static_cast<int>(incoming_.size());
  incoming_.clear();
  request_deadlines_.clear();
}

bool ObjectDataServer::AcceptWaiting(absl::Time now) {
  while (true) {
    UniqueFd fd(::accept4(listener_.get(), nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK));
    if (!fd.valid()) {
      if (errno == EINTR || errno == ECONNABORTED) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) return true;
      if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) return false;
      return true;  // an error of that one connection (a network error): the next may be fine
    }
    bool at_limit = false;
    {
      absl::MutexLock lock(&mu_);
      if (open_connections_ >= options_.max_connections) {
        at_limit = true;
      } else {
        ++open_connections_;
      }
    }
    if (at_limit) {
      SendReplyWithoutBlocking(fd.get(), absl::StatusCode::kUnavailable,
                               absl::StrCat("the data port is at its connection limit (",
                                            options_.max_connections, " open); try again"));
      CloseGracefully(std::move(fd));
      continue;
    }
    const uint64_t serial = kFirstConnectionKey + next_serial_++;
    epoll_event event = {};
    event.events = EPOLLIN | EPOLLRDHUP;
    event.data.u64 = serial;
    if (::epoll_ctl(loop_.epoll.get(), EPOLL_CTL_ADD, fd.get(), &event) != 0) {
      CloseConnection(std::move(fd));
      continue;
    }
    Incoming& incoming = incoming_[serial];
    incoming.fd = std::move(fd);
    incoming.accepted = now;
    request_deadlines_.emplace_back(now + options_.request_timeout, serial);
  }
}

void ObjectDataServer::ReadRequest(uint64_t serial) {
  auto it = incoming_.find(serial);
  if (it == incoming_.end()) return;
  Incoming& incoming = it->second;
  bool ended = false;
  while (incoming.got < kDataRequestBytes) {
    const ssize_t n = ::recv(incoming.fd.get(), incoming.bytes + incoming.got,
                             kDataRequestBytes - incoming.got, MSG_DONTWAIT);
    if (n > 0) {
      incoming.got += static_cast<size_t>(n);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;  // the rest comes later
    ended = true;  // end of stream, or the connection failed
    break;
  }
  if (ended && incoming.got == 0) {  // gone without a word: nothing to answer
    UniqueFd fd = std::move(incoming.fd);
    incoming_.erase(it);
    CloseConnection(std::move(fd));
    return;
  }
  // Whole, or cut short by the peer (then the parse refuses it, as it would any partial one).
  (void)::epoll_ctl(loop_.epoll.get(), EPOLL_CTL_DEL, incoming.fd.get(), nullptr);
  Incoming whole = std::move(incoming);
  incoming_.erase(it);
  HandleRequest(std::move(whole));
}

void ObjectDataServer::HandleRequest(Incoming incoming) {
  auto request = ParseDataRequest(std::string_view(incoming.bytes, incoming.got));
  if (!request.ok()) {
    return Refuse(std::move(incoming.fd), request.status().code(),
                  ToStd(request.status().message()));
  }
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
    return Refuse(std::move(incoming.fd), absl::StatusCode::kUnauthenticated,
                  "unknown or used data ticket");
  }
  if (request->action == DataAction::kDrop) {  // answered by closing
    IgnoreStatus(local_.store->Release(kLocalStoreClient, offer->id),
                 "cannot fail: this server's Get pinned it for this client");
    return CloseConnection(std::move(incoming.fd));
  }
  if (absl::Status blocking = SetNonBlocking(incoming.fd.get(), false); !blocking.ok()) {
    IgnoreStatus(local_.store->Release(kLocalStoreClient, offer->id),
                 "cannot fail: this server's Get pinned it for this client");
    return Refuse(std::move(incoming.fd), blocking.code(), ToStd(blocking.message()));
  }
  {
    absl::MutexLock lock(&mu_);
    if (!stopping_) {
      queued_.push_back(Transfer{std::move(incoming.fd), *std::move(offer),
                                 incoming.accepted + options_.transfer_timeout});
      transfer_queued_.Signal();
      return;
    }
  }
  IgnoreStatus(local_.store->Release(kLocalStoreClient, offer->id),
               "cannot fail: this server's Get pinned it for this client");
  CloseConnection(std::move(incoming.fd));
}

void ObjectDataServer::SenderLoop() {
  std::vector<uint8_t> buffer(kSealedChunkBytes + kSealTagBytes);
  while (true) {
    Transfer transfer;
    {
      absl::MutexLock lock(&mu_);
      while (queued_.empty() && !stopping_) transfer_queued_.Wait(&mu_);
      if (stopping_) return;  // Stop releases what is still queued
      transfer = std::move(queued_.front());
      queued_.pop_front();
      sending_fds_.insert(transfer.fd.get());
    }
    Send(transfer, buffer);
    IgnoreStatus(local_.store->Release(kLocalStoreClient, transfer.offer.id),
                 "cannot fail: this server's Get pinned it for this client");
    {
      absl::MutexLock lock(&mu_);
      sending_fds_.erase(transfer.fd.get());  // from here on Stop does not touch the fd
    }
    CloseConnection(std::move(transfer.fd));
  }
}

void ObjectDataServer::Send(const Transfer& transfer, std::vector<uint8_t>& buffer) {
  const int fd = transfer.fd.get();
  const ObjectLocation& location = transfer.offer.location;
  if (absl::Now() >= transfer.deadline) {
    return SendReplyWithoutBlocking(fd, absl::StatusCode::kDeadlineExceeded,
                                    absl::StrCat("the transfer waited past its timeout (",
                                                 absl::FormatDuration(options_.transfer_timeout),
                                                 ") for one of the data port's ",
                                                 options_.transfer_threads, " sending threads"));
  }
  auto sealer = ChunkSealer::Create(transfer.offer.key, location.data_size);
  if (!sealer.ok()) {
    return SendReplyWithoutBlocking(fd, sealer.status().code(), ToStd(sealer.status().message()));
  }
  std::string header = EncodeDataReply(absl::StatusCode::kOk, location.data_size, "");
  if (!WriteAll(fd, header.data(), header.size(), transfer.deadline).ok()) return;
  // Sealed from the mapping into the buffer (still in cache when the send copies it into the
  // socket), one send per chunk. A failure to seal ends the stream short: the puller refuses it.
  local_.arena->PopulateForRead(location.offset, location.data_size);
  const uint8_t* object = local_.arena->base() + location.offset;
  uint64_t at = 0;
  for (uint64_t i = 0; i < ChunkCount(location.data_size); ++i) {
    const size_t n = ChunkPlaintextBytes(location.data_size, i);
    if (!sealer->Seal(i, std::span(object + at, n), buffer.data()).ok()) return;
    if (!WriteAll(fd, buffer.data(), n + kSealTagBytes, transfer.deadline).ok()) return;
    at += n;
  }
}

void ObjectDataServer::Refuse(UniqueFd fd, absl::StatusCode code, std::string_view message) {
  SendReplyWithoutBlocking(fd.get(), code, message);
  CloseConnection(std::move(fd));
}

void ObjectDataServer::CloseConnection(UniqueFd fd) {
  CloseGracefully(std::move(fd));
  absl::MutexLock lock(&mu_);
  --open_connections_;
}

void ObjectDataServer::Stop() {
  {
    absl::MutexLock lock(&mu_);
    if (stopping_) return;
    stopping_ = true;
    // Unblocks every sender's send; each then releases its pin.
    for (int fd : sending_fds_) ::shutdown(fd, SHUT_RDWR);
    transfer_queued_.SignalAll();
  }
  WakeEventFd(loop_.wake.get());
  if (event_thread_.joinable()) event_thread_.join();
  for (std::thread& sender : sender_threads_) {
    if (sender.joinable()) sender.join();
  }
  std::deque<Transfer> queued;
  {
    absl::MutexLock lock(&mu_);
    queued.swap(queued_);
    open_connections_ -= static_cast<int>(queued.size());
    for (const Transfer& transfer : queued) {
      IgnoreStatus(local_.store->Release(kLocalStoreClient, transfer.offer.id),
                   "cannot fail: this server's Get pinned it for this client");
    }
    ExpireLocked(absl::Now());
  }
  listener_.Reset();
}

}  // namespace tessera
