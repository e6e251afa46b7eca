#include "api/local_worker_channel.h"

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <iostream>
#include <utility>

#include "rpc/local_stream_socket.h"

namespace tessera::api {
namespace {

std::atomic<int> open_channels{0};

}  // namespace

int LocalWorkerChannel::OpenCount() { return open_channels.load(); }

absl::StatusOr<std::shared_ptr<LocalWorkerChannel>> LocalWorkerChannel::Connect(
    const std::string& name, pid_t pid, std::shared_ptr<grpc::Channel> control,
    ResultsFn on_results, std::function<void()> on_done) {
  if (open_channels.fetch_add(1) >= kMaxOpen) {
    open_channels.fetch_sub(1);
    return absl::ResourceExhaustedError(
        absl::StrCat(kMaxOpen, " local worker streams are open already"));
  }
  absl::StatusOr<int> fd = rpc::ConnectLocal(name, pid);
  if (!fd.ok()) {
    open_channels.fetch_sub(1);
    return fd.status();
  }
  std::shared_ptr<LocalWorkerChannel> self(
      new LocalWorkerChannel(*fd, pid, std::move(on_results), std::move(on_done)));
  self->control_ = v1::Worker::NewStub(std::move(control));
  self->reader_ = std::thread([raw = self.get()] { raw->ReadLoop(); });
  return self;
}

LocalWorkerChannel::~LocalWorkerChannel() {
  std::thread writer;
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
    changed_.SignalAll();
    writer.swap(writer_);
  }
  shutdown(fd_, SHUT_RDWR);
  if (reader_.joinable()) {
    if (reader_.get_id() == std::this_thread::get_id()) {
      reader_.detach();  // its last step was done_: it touches nothing of this any more
    } else {
      reader_.join();
    }
  }
  if (writer.joinable()) writer.join();
  close(fd_);
  open_channels.fetch_sub(1);
}

void LocalWorkerChannel::Send(v1::TaskBatch batch) {
  absl::MutexLock lock(&mu_);
  if (closing_ || broken_) return;  // the submitter learns of a dead worker from its exit
  rpc::AppendFrame(batch, &pending_);
  if (!writer_owns_) WriteNowLocked();
}

void LocalWorkerChannel::WriteNowLocked() {
  while (!pending_.empty()) {
    const ssize_t n = send(fd_, pending_.data(), pending_.size(), MSG_DONTWAIT | MSG_NOSIGNAL);
    if (n > 0) {
      pending_.erase(0, static_cast<size_t>(n));
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      writer_owns_ = true;
      if (!writer_.joinable()) {
        writer_ = std::thread([this] { WriteLoop(); });
      } else {
        changed_.Signal();
      }
      return;
    }
    broken_ = true;  // the worker is gone: its exit ends its tasks
    pending_.clear();
    return;
  }
  if (closing_ && !half_closed_) {
    half_closed_ = true;
    shutdown(fd_, SHUT_WR);
  }
}

void LocalWorkerChannel::WriteLoop() {
  while (true) {
    {
      absl::MutexLock lock(&mu_);
      while (!writer_owns_ && !stopping_) changed_.Wait(&mu_);
      if (stopping_) return;
    }
    pollfd room{fd_, POLLOUT, 0};
    poll(&room, 1, /*timeout_ms=*/1000);  // a second at most: stopping_ is looked at again
    absl::MutexLock lock(&mu_);
    if (stopping_) return;
    writer_owns_ = false;
    WriteNowLocked();
  }
}

void LocalWorkerChannel::Close() {
  absl::MutexLock lock(&mu_);
  closing_ = true;
  if (!writer_owns_) WriteNowLocked();
}

void LocalWorkerChannel::CancelTask(const std::string& task_id, bool force, bool recursive) {
  SendCancelTask(*control_, task_id, force, recursive);
}

void LocalWorkerChannel::ExitActor() { SendExitActor(*control_); }

void LocalWorkerChannel::Cancel() {
  {
    absl::MutexLock lock(&mu_);
    broken_ = true;
    pending_.clear();
  }
  shutdown(fd_, SHUT_RDWR);
}

void LocalWorkerChannel::ReadLoop() {
  pthread_setname_np(pthread_self(), "worker-stream");
  rpc::FrameReader reader(fd_);
  v1::TaskResultBatch results;
  while (reader.Next(&results)) {
    on_results_(results);
    results.Clear();
  }
  if (!reader.error().empty()) {
    std::cerr << "tessera: the task stream of worker pid " << pid_ << " broke: " << reader.error()
              << "\n";
  }
  {
    absl::MutexLock lock(&mu_);
    broken_ = true;
    pending_.clear();
  }
  shutdown(fd_, SHUT_RDWR);  // a worker still reading sees the end, and exits
  on_done_();
  absl::MutexLock lock(&mu_);
  done_ = true;
}

bool LocalWorkerChannel::done() {
  absl::MutexLock lock(&mu_);
  return done_;
}

}  // namespace tessera::api
