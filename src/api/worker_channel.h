// The owner's end of one worker's task stream. WorkerStream is what the leases hold of one;
// GrpcWorkerChannel is its Worker.PushTasks stream (proto worker.proto), on gRPC's callback API
// so no thread waits per worker (api/local_worker_channel.h is the same stream over a local
// socket, for a worker on the owner's host). Batches handed to Send while a write is in
// flight are merged into the next write, so a burst of submissions leaves as a few large messages.
// Close half-closes the stream (the worker exits when it sees the end).
//
// Threading: thread-safe. Callbacks (results, done) run on gRPC's threads. The owner of the
// shared_ptr must keep it until done() (destroying it inside gRPC's OnDone would release the
// call's context under gRPC's feet), and destroy it on a thread of its own.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "api/task_submitter.h"
#include "grpcpp/grpcpp.h"
#include "tessera/v1/worker.grpc.pb.h"

namespace tessera::api {

// A worker's task stream as its owner's leases hold it: a WorkerChannel that can be cut and says
// when it is over.
class WorkerStream : public WorkerChannel {
 public:
  // Ends the stream at once (shutdown).
  virtual void Cancel() = 0;
  // The stream is over: the object may be destroyed.
  virtual bool done() = 0;
};

// Worker.CancelTask and Worker.ExitActor (from_owner) to the worker behind `stub`, unary calls
// beside its stream, fire and forget (a worker that is gone has ended its tasks and its actor).
void SendCancelTask(v1::Worker::Stub& stub, const std::string& task_id, bool force, bool recursive);
void SendExitActor(v1::Worker::Stub& stub);

class GrpcWorkerChannel final : public WorkerStream,
                                public grpc::ClientBidiReactor<v1::TaskBatch, v1::TaskResultBatch> {
 public:
  using ResultsFn = std::function<void(const v1::TaskResultBatch&)>;
  // `on_done` runs once, when the stream is over (after the last results). `guest`: a stream of
  // calls to another driver's actor (worker::kGuestStreamKey says so to the worker), not the
  // owner's stream of its own worker.
  static std::shared_ptr<GrpcWorkerChannel> Start(std::shared_ptr<grpc::Channel> channel,
                                                  ResultsFn on_results,
                                                  std::function<void()> on_done,
                                                  bool guest = false);

  void Send(v1::TaskBatch batch) override;
  void Close() override;
  // A unary Worker.CancelTask beside the stream (fire and forget: the task's end says the rest).
  void CancelTask(const std::string& task_id, bool force, bool recursive) override;
  // A unary Worker.ExitActor (from_owner) beside the stream, fire and forget.
  void ExitActor() override;
  void Cancel() override;
  bool done() override;

  void OnWriteDone(bool ok) override;
  void OnReadDone(bool ok) override;
  void OnWritesDoneDone(bool ok) override;
  void OnDone(const grpc::Status& status) override;

 private:
  GrpcWorkerChannel(ResultsFn on_results, std::function<void()> on_done)
      : on_results_(std::move(on_results)), on_done_(std::move(on_done)) {}
  void StartNextWriteLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const ResultsFn on_results_;
  const std::function<void()> on_done_;
  std::unique_ptr<v1::Worker::Stub> stub_;
  grpc::ClientContext context_;
  v1::TaskResultBatch incoming_;  // owned by the read in flight

  absl::Mutex mu_;
  v1::TaskBatch writing_ ABSL_GUARDED_BY(mu_);  // owned by the write in flight
  v1::TaskBatch pending_ ABSL_GUARDED_BY(mu_);
  bool write_in_flight_ ABSL_GUARDED_BY(mu_) = false;
  bool closing_ ABSL_GUARDED_BY(mu_) = false;
  bool writes_done_ ABSL_GUARDED_BY(mu_) = false;
  bool broken_ ABSL_GUARDED_BY(mu_) = false;
  bool done_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace tessera::api
