#include "objects/object_store_server.h"

#include <fcntl.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <string_view>
#include <system_error>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "objects/store_protocol.h"

namespace tessera {
namespace {

absl::Status Errno(std::string_view what) {
  return absl::InternalError(
      absl::StrCat(absl::string_view(what.data(), what.size()), ": ", std::strerror(errno)));
}

// The spill folder: a directory of this user, 0700, with nothing left from an earlier store (its
// objects died with it).
absl::Status PrepareSpillDir(const std::string& dir) {
  if (mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST) {
    return Errno(absl::StrCat("creating the spill folder ", dir));
  }
  struct stat st {};
  if (lstat(dir.c_str(), &st) != 0) return Errno(absl::StrCat("spill folder ", dir));
  if (!S_ISDIR(st.st_mode) || st.st_uid != geteuid()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "spill folder ", dir, " is not a directory of this user (uid ", geteuid(), ")"));
  }
  if (chmod(dir.c_str(), 0700) != 0) return Errno(absl::StrCat("chmod 0700 ", dir));
  std::error_code ec;
  for (const auto& item : std::filesystem::directory_iterator(dir, ec)) {
    std::error_code ignored;
    if (!item.is_directory(ignored)) std::filesystem::remove(item.path(), ignored);
  }
  if (ec) {
    return absl::InternalError(absl::StrCat("listing the spill folder ", dir, ": ", ec.message()));
  }
  return absl::OkStatus();
}

absl::StatusOr<sockaddr_un> SocketAddress(const std::string& path) {
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (path.empty() || path.size() >= sizeof(addr.sun_path)) {
    return absl::InvalidArgumentError(absl::StrCat("object store socket path must be 1..",
                                                   sizeof(addr.sun_path) - 1, " bytes, got ",
                                                   path.size(), ": ", path));
  }
  std::memcpy(addr.sun_path, path.data(), path.size());
  return addr;
}

// The store maps its memory into every client: only processes of this user (or root, who can
// read any process's memory anyway) may connect, whatever the socket file's mode.
bool PeerMayConnect(int fd) {
  ucred peer{};
  socklen_t length = sizeof(peer);
  if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &peer, &length) != 0) return false;
  return peer.uid == geteuid() || peer.uid == 0;
}

// True when something accepts connections at `path`.
bool SomeoneListens(const sockaddr_un& addr) {
  const int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return false;
  const bool live = connect(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof(addr)) == 0;
  close(fd);
  return live;
}

}  // namespace

// Seals reach the loop through this queue and eventfd, whichever thread sealed (a client's
// request on the loop itself, or the hosting agent calling store() directly).
// Threading: thread-safe.
struct ObjectStoreServer::SealQueue {
  explicit SealQueue(int fd) : event_fd(fd) {}
  ~SealQueue() { close(event_fd); }
  void Push(const ObjectId& id) {
    {
      absl::MutexLock lock(&mu);
      ids.push_back(id);
    }
    const uint64_t one = 1;
    (void)!write(event_fd, &one, sizeof(one));
  }
  std::vector<ObjectId> Drain() {
    uint64_t count = 0;
    (void)!read(event_fd, &count, sizeof(count));
    absl::MutexLock lock(&mu);
    return std::exchange(ids, {});
  }
  const int event_fd;
  absl::Mutex mu;
  std::vector<ObjectId> ids ABSL_GUARDED_BY(mu);
};

// The socket loop: one epoll over the listening socket, a stop eventfd and every connection.
// Threading: everything but RequestStop runs on the loop thread.
class ObjectStoreServer::Loop {
 public:
  Loop(ObjectStoreServer& server, int listen_fd, int epoll_fd, int stop_fd)
      : server_(server), listen_fd_(listen_fd), epoll_fd_(epoll_fd), stop_fd_(stop_fd) {}
  ~Loop() {
    close(listen_fd_);
    close(epoll_fd_);
    close(stop_fd_);
  }

  void Run() {
    std::vector<epoll_event> events(64);
    while (true) {
      const int n =
          epoll_wait(epoll_fd_, events.data(), static_cast<int>(events.size()), WaitTimeoutMs());
      if (n < 0) {
        if (errno == EINTR) continue;
        break;  // cannot happen with valid fds; stopping is the only safe answer
      }
      for (int i = 0; i < n; ++i) {
        const int fd = events[i].data.fd;
        if (fd == stop_fd_) {
          CloseAll();
          return;
        }
        if (fd == listen_fd_) {
          Accept();
          continue;
        }
        if (fd == server_.seals_->event_fd) {
          for (const ObjectId& id : server_.seals_->Drain()) WakeWaiters(id);
          continue;
        }
        auto it = connections_.find(fd);
        if (it == connections_.end()) continue;
        Connection& conn = it->second;
        if (events[i].events & EPOLLOUT) Flush(conn);
        if (events[i].events & (EPOLLIN | EPOLLHUP | EPOLLERR | EPOLLRDHUP)) Read(conn);
        if (conn.dead || (conn.close_after_flush && conn.out.empty())) Close(fd);
      }
      ExpireWaiters();
    }
    CloseAll();
  }

  void RequestStop() {
    const uint64_t one = 1;
    (void)!write(stop_fd_, &one, sizeof(one));
  }

 private:
  struct Connection {
    int fd = -1;
    StoreClientId id;
    std::string in;
    std::string out;
    bool said_hello = false;
    bool close_after_flush = false;
    bool dead = false;
    bool want_write = false;
    // A Get waiting for its object to be sealed; later requests wait in `in` meanwhile.
    bool waiting = false;
    ObjectId wait_id;
    absl::Time deadline;
  };

  void Accept() {
    while (true) {
      const int fd = accept4(listen_fd_, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
      if (fd < 0) return;  // EAGAIN, or a client that vanished in between
      if (!PeerMayConnect(fd)) {
        close(fd);
        server_.refused_.fetch_add(1);
        continue;
      }
      epoll_event ev{};
      ev.events = EPOLLIN | EPOLLRDHUP;
      ev.data.fd = fd;
      if (epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, fd, &ev) != 0) {
        close(fd);
        continue;
      }
      Connection& conn = connections_[fd];
      conn.fd = fd;
      conn.id = StoreClientId(next_client_id_++);
      server_.connections_.fetch_add(1);
    }
  }

  void Read(Connection& conn) {
    char buf[64 * 1024];
    while (!conn.dead) {
      const ssize_t n = recv(conn.fd, buf, sizeof(buf), 0);
      if (n > 0) {
        conn.in.append(buf, static_cast<size_t>(n));
        continue;
      }
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
      if (n < 0 && errno == EINTR) continue;
      conn.dead = true;  // EOF or error: the client went away
    }
    // Answer what arrived, even from a client that has since closed its side.
    ProcessFrames(conn);
  }

  void ProcessFrames(Connection& conn) {
    size_t pos = 0;
    while (!conn.close_after_flush && !conn.waiting &&
           conn.in.size() - pos >= kStoreFrameHeaderBytes) {
      absl::StatusOr<uint32_t> length =
          ParseFrameHeader(std::string_view(conn.in).substr(pos, kStoreFrameHeaderBytes));
      if (!length.ok()) {
        // The stream cannot be resynchronized: answer once, then close.
        Send(conn, EncodeStoreReply(StoreReply{.status = length.status()}), -1);
        conn.close_after_flush = true;
        break;
      }
      if (conn.in.size() - pos < kStoreFrameHeaderBytes + *length) break;
      Handle(conn, std::string_view(conn.in).substr(pos + kStoreFrameHeaderBytes, *length));
      pos += kStoreFrameHeaderBytes + *length;
    }
    conn.in.erase(0, pos);
  }

  void Handle(Connection& conn, std::string_view body) {
    absl::StatusOr<StoreRequest> request = ParseStoreRequest(body);
    if (!request.ok()) {
      Send(conn, EncodeStoreReply(StoreReply{.status = request.status()}), -1);
      return;
    }
    ObjectStore& store = *server_.store_;
    StoreReply reply;
    int pass_fd = -1;
    switch (request->type) {
      case StoreMessageType::kHello:
        if (conn.said_hello || !conn.out.empty()) {
          reply.status = absl::FailedPreconditionError("Hello must be the first and only Hello");
          break;
        }
        conn.said_hello = true;
        reply.arena_size = server_.arena_->size();
        pass_fd = server_.arena_->fd();
        break;
      case StoreMessageType::kCreate: {
        auto loc =
            store.Create(conn.id, request->id, request->data_size, std::move(request->metadata),
                         CreateObjectOptions{.evictable = request->evictable,
                                             .owner = std::move(request->owner)});
        if (loc.ok())
          reply.location = *std::move(loc);
        else
          reply.status = loc.status();
        break;
      }
      case StoreMessageType::kSeal: reply.status = store.Seal(conn.id, request->id); break;
      case StoreMessageType::kAbort: reply.status = store.Abort(conn.id, request->id); break;
      case StoreMessageType::kGet: {
        auto loc = store.Get(conn.id, request->id);
        if (!loc.ok() && loc.status().code() == absl::StatusCode::kNotFound &&
            request->wait_ms > 0) {
          // Answered when a seal wakes it (WakeWaiters) or at its deadline (ExpireWaiters).
          conn.waiting = true;
          conn.wait_id = request->id;
          conn.deadline = absl::Now() + absl::Milliseconds(request->wait_ms);
          waiters_[request->id].push_back(conn.fd);
          server_.waiting_gets_.fetch_add(1);
          return;
        }
        if (loc.ok())
          reply.location = *std::move(loc);
        else
          reply.status = loc.status();
        break;
      }
      case StoreMessageType::kRelease: reply.status = store.Release(conn.id, request->id); break;
      case StoreMessageType::kDelete: reply.status = store.Delete(request->id); break;
      case StoreMessageType::kContains: reply.contains = store.Contains(request->id); break;
      case StoreMessageType::kStats: reply.stats = store.Stats(); break;
      case StoreMessageType::kOwner:
        reply.status = store.DeclareOwner(conn.id, request->owner);
        break;
      case StoreMessageType::kReply:
        reply.status = absl::InvalidArgumentError("a Reply is not a request");
        break;
    }
    Send(conn, EncodeStoreReply(reply), pass_fd);
  }

  int WaitTimeoutMs() const {
    if (waiters_.empty()) return -1;
    absl::Time first = absl::InfiniteFuture();
    for (const auto& [fd, conn] : connections_) {
      if (conn.waiting && conn.deadline < first) first = conn.deadline;
    }
    if (first == absl::InfiniteFuture()) return -1;
    const int64_t ms = absl::ToInt64Milliseconds(first - absl::Now()) + 1;
    return static_cast<int>(std::clamp<int64_t>(ms, 0, 60'000));
  }

  void StopWaiting(Connection& conn) {
    conn.waiting = false;
    server_.waiting_gets_.fetch_sub(1);
    auto it = waiters_.find(conn.wait_id);
    if (it == waiters_.end()) return;
    std::erase(it->second, conn.fd);
    if (it->second.empty()) waiters_.erase(it);
  }

  void WakeWaiters(const ObjectId& id) {
    auto it = waiters_.find(id);
    if (it == waiters_.end()) return;
    const std::vector<int> fds = it->second;
    for (int fd : fds) {
      auto cit = connections_.find(fd);
      if (cit == connections_.end() || !cit->second.waiting) continue;
      Connection& conn = cit->second;
      absl::StatusOr<ObjectLocation> loc = server_.store_->Get(conn.id, id);
      if (!loc.ok() && loc.status().code() == absl::StatusCode::kNotFound) continue;
      StopWaiting(conn);
      StoreReply reply;
      if (loc.ok())
        reply.location = *std::move(loc);
      else
        reply.status = loc.status();
      Send(conn, EncodeStoreReply(reply), -1);
      ProcessFrames(conn);
      if (conn.dead || (conn.close_after_flush && conn.out.empty())) Close(fd);
    }
  }

  void ExpireWaiters() {
    if (waiters_.empty()) return;
    const absl::Time now = absl::Now();
    std::vector<int> expired;
    for (auto& [fd, conn] : connections_) {
      if (conn.waiting && conn.deadline <= now) expired.push_back(fd);
    }
    for (int fd : expired) {
      Connection& conn = connections_.find(fd)->second;
      StopWaiting(conn);
      Send(conn,
           EncodeStoreReply(
               StoreReply{.status = absl::DeadlineExceededError(absl::StrCat(
                              "object ", conn.wait_id.Hex(), " was not sealed in time"))}),
           -1);
      ProcessFrames(conn);
      if (conn.dead || (conn.close_after_flush && conn.out.empty())) Close(fd);
    }
  }

  // Queues a framed reply, writing at once what the socket takes. `pass_fd` (or -1) rides on the
  // first byte; callers only pass one while nothing else is queued.
  void Send(Connection& conn, std::string_view body, int pass_fd) {
    const std::string frame = Frame(body);
    if (!conn.out.empty()) {
      conn.out.append(frame);
      return;
    }
    size_t sent = 0;
    if (pass_fd >= 0) {
      iovec iov{const_cast<char*>(frame.data()), frame.size()};
      alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))] = {};
      msghdr msg{};
      msg.msg_iov = &iov;
      msg.msg_iovlen = 1;
      msg.msg_control = control;
      msg.msg_controllen = sizeof(control);
      cmsghdr* cmsg = CMSG_FIRSTHDR(&msg);
      cmsg->cmsg_level = SOL_SOCKET;
      cmsg->cmsg_type = SCM_RIGHTS;
      cmsg->cmsg_len = CMSG_LEN(sizeof(int));
      std::memcpy(CMSG_DATA(cmsg), &pass_fd, sizeof(int));
      const ssize_t n = sendmsg(conn.fd, &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
      if (n < 0) {
        // A fresh socket always takes a small first message; failing here means it is gone.
        conn.dead = true;
        return;
      }
      sent = static_cast<size_t>(n);
    }
    conn.out.append(frame, sent, std::string::npos);
    Flush(conn);
  }

  void Flush(Connection& conn) {
    while (!conn.out.empty()) {
      const ssize_t n =
          send(conn.fd, conn.out.data(), conn.out.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
      if (n > 0) {
        conn.out.erase(0, static_cast<size_t>(n));
        continue;
      }
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
      conn.dead = true;
      return;
    }
    const bool want_write = !conn.out.empty();
    if (want_write != conn.want_write) {
      epoll_event ev{};
      ev.events = EPOLLIN | EPOLLRDHUP | (want_write ? uint32_t{EPOLLOUT} : uint32_t{0});
      ev.data.fd = conn.fd;
      (void)epoll_ctl(epoll_fd_, EPOLL_CTL_MOD, conn.fd, &ev);
      conn.want_write = want_write;
    }
  }

  void Close(int fd) {
    auto it = connections_.find(fd);
    if (it == connections_.end()) return;
    const StoreClientId id = it->second.id;
    if (it->second.waiting) StopWaiting(it->second);
    (void)epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, fd, nullptr);
    close(fd);
    connections_.erase(it);
    server_.store_->DisconnectClient(id);
    server_.connections_.fetch_sub(1);
  }

  void CloseAll() {
    std::vector<int> fds;
    for (const auto& [fd, conn] : connections_) fds.push_back(fd);
    for (int fd : fds) Close(fd);
  }

  ObjectStoreServer& server_;
  const int listen_fd_;
  const int epoll_fd_;
  const int stop_fd_;
  absl::flat_hash_map<int, Connection> connections_;
  absl::flat_hash_map<ObjectId, std::vector<int>> waiters_;  // object -> waiting connection fds
  int64_t next_client_id_ = 1;                               // 0 is kLocalStoreClient
};

ObjectStoreServer::ObjectStoreServer(ObjectStoreServerOptions options,
                                     std::unique_ptr<SharedMemoryArena> arena,
                                     std::unique_ptr<ObjectStore> store)
    : options_(std::move(options)), arena_(std::move(arena)), store_(std::move(store)) {}

absl::StatusOr<std::unique_ptr<ObjectStoreServer>> ObjectStoreServer::Start(
    ObjectStoreServerOptions options) {
  if (options.capacity_bytes < ArenaAllocator::kAlignment) {
    return absl::InvalidArgumentError(absl::StrCat("object store capacity must be at least ",
                                                   ArenaAllocator::kAlignment, " bytes, got ",
                                                   options.capacity_bytes));
  }
  absl::StatusOr<sockaddr_un> addr = SocketAddress(options.socket_path);
  if (!addr.ok()) return addr.status();
  struct stat st {};
  if (lstat(options.socket_path.c_str(), &st) == 0) {
    if (!S_ISSOCK(st.st_mode)) {
      return absl::AlreadyExistsError(absl::StrCat("object store socket path ", options.socket_path,
                                                   " exists and is not a socket"));
    }
    if (SomeoneListens(*addr)) {
      return absl::AlreadyExistsError(
          absl::StrCat("an object store already listens at ", options.socket_path));
    }
    unlink(options.socket_path.c_str());  // stale: its server died without cleaning up
  }

  if (!options.spill_dir.empty()) {
    if (absl::Status ready = PrepareSpillDir(options.spill_dir); !ready.ok()) return ready;
  }
  absl::StatusOr<std::unique_ptr<SharedMemoryArena>> arena =
      SharedMemoryArena::Create(options.capacity_bytes, options.arena);
  if (!arena.ok()) return arena.status();
  const int seal_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (seal_fd < 0) return Errno("eventfd for the object store");
  auto seals = std::make_unique<SealQueue>(seal_fd);
  auto store = std::make_unique<ObjectStore>(ObjectStoreOptions{
      .capacity_bytes = options.capacity_bytes,
      .max_metadata_bytes = options.max_metadata_bytes,
      .on_sealed = [queue = seals.get()](const ObjectId& id) { queue->Push(id); },
      .memory = (*arena)->base(),
      .spill_dir = options.spill_dir});

  const int listen_fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (listen_fd < 0) return Errno("socket for the object store");
  // 0600 whatever the umask, before anyone may connect (listen comes after the chmod).
  if (bind(listen_fd, reinterpret_cast<const sockaddr*>(&*addr), sizeof(*addr)) != 0 ||
      chmod(options.socket_path.c_str(), 0600) != 0 || listen(listen_fd, 128) != 0) {
    absl::Status s = Errno(absl::StrCat("listening on ", options.socket_path));
    close(listen_fd);
    return s;
  }
  const int epoll_fd = epoll_create1(EPOLL_CLOEXEC);
  const int stop_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (epoll_fd < 0 || stop_fd < 0) {
    absl::Status s = Errno("epoll/eventfd for the object store");
    close(listen_fd);
    if (epoll_fd >= 0) close(epoll_fd);
    if (stop_fd >= 0) close(stop_fd);
    unlink(options.socket_path.c_str());
    return s;
  }
  for (int fd : {listen_fd, stop_fd, seal_fd}) {
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.fd = fd;
    (void)epoll_ctl(epoll_fd, EPOLL_CTL_ADD, fd, &ev);
  }

  std::unique_ptr<ObjectStoreServer> server(
      new ObjectStoreServer(std::move(options), *std::move(arena), std::move(store)));
  server->seals_ = std::move(seals);
  server->loop_ = std::make_unique<Loop>(*server, listen_fd, epoll_fd, stop_fd);
  server->thread_ = std::thread([loop = server->loop_.get()] { loop->Run(); });
  return server;
}

ObjectStoreServer::~ObjectStoreServer() { Stop(); }

void ObjectStoreServer::Stop() {
  if (stopped_) return;
  stopped_ = true;
  loop_->RequestStop();
  thread_.join();
  loop_.reset();
  unlink(options_.socket_path.c_str());
}

}  // namespace tessera
