// LocalWorkerChannel: the owner's end of a worker's task stream when the worker runs on the
// owner's host as the owner's user: the same TaskBatch and TaskResultBatch messages as
// Worker.PushTasks, over the worker's abstract Unix socket (rpc/local_stream_socket.h), with no
// TLS, no HTTP/2 and no hand-off between gRPC's threads. A batch is written by the thread that
// sends it when the socket takes it (the common case: no other thread is woken); what the socket
// cannot take at once is left to a writer thread started for it, so Send never blocks. One
// thread per channel reads the results and hands them on. Close half-closes the stream (the
// worker exits when it sees the end); CancelTask and ExitActor go as gRPC calls beside it.
//
// Threading: thread-safe. Callbacks run on the channel's reader thread. The owner of the
// shared_ptr keeps it until done() and destroys it on a thread of its own.
#pragma once

#include <sys/types.h>

#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "api/worker_channel.h"
#include "grpcpp/grpcpp.h"
#include "tessera/v1/worker.grpc.pb.h"

namespace tessera::api {

class LocalWorkerChannel final : public WorkerStream {
 public:
  using ResultsFn = std::function<void(const v1::TaskResultBatch&)>;
  // At most this many local channels are open in a process at once (one reader thread each);
  // the workers beyond them get Worker.PushTasks.
  static constexpr int kMaxOpen = 256;

  // Connects to the stream the worker `pid` offers at abstract socket `name`: the channel, or
  // why not (the caller then opens Worker.PushTasks): the worker is not on this host, runs as
  // another user, another process holds the name, or kMaxOpen channels are open. `control`: the
  // worker's gRPC channel, for CancelTask and ExitActor.
  static absl::StatusOr<std::shared_ptr<LocalWorkerChannel>> Connect(
      const std::string& name, pid_t pid, std::shared_ptr<grpc::Channel> control,
      ResultsFn on_results, std::function<void()> on_done);
  ~LocalWorkerChannel() override;

  void Send(v1::TaskBatch batch) override;
  void Close() override;
  void CancelTask(const std::string& task_id, bool force, bool recursive) override;
  void ExitActor() override;
  void Cancel() override;
  bool done() override;

  // Local channels open in this process now.
  static int OpenCount();

 private:
  LocalWorkerChannel(int fd, pid_t pid, ResultsFn on_results, std::function<void()> on_done)
      : fd_(fd), pid_(pid), on_results_(std::move(on_results)), on_done_(std::move(on_done)) {}
  void ReadLoop();
  void WriteLoop();
  // Writes what the socket takes of pending_ now, without blocking; the rest is handed to the
  // writer thread. Half-closes once everything is written after Close.
  void WriteNowLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const int fd_;
  const pid_t pid_;
  const ResultsFn on_results_;
  const std::function<void()> on_done_;
  std::unique_ptr<v1::Worker::Stub> control_;
  std::thread reader_;

  absl::Mutex mu_;
  absl::CondVar changed_;                          // writer_owns_ or stopping_ became true
  std::string pending_ ABSL_GUARDED_BY(mu_);       // frames not yet written, in order
  bool writer_owns_ ABSL_GUARDED_BY(mu_) = false;  // the writer thread drains pending_
  std::thread writer_ ABSL_GUARDED_BY(mu_);
  bool closing_ ABSL_GUARDED_BY(mu_) = false;
  bool half_closed_ ABSL_GUARDED_BY(mu_) = false;
  bool broken_ ABSL_GUARDED_BY(mu_) = false;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  bool done_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace tessera::api
