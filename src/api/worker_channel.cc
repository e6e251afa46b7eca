#include "api/worker_channel.h"

#include <utility>

#include "rpc/auth.h"
#include "rpc/channel.h"
#include "worker/worker_runtime.h"

namespace tessera::api {

std::shared_ptr<GrpcWorkerChannel> GrpcWorkerChannel::Start(std::shared_ptr<grpc::Channel> channel,
                                                            ResultsFn on_results,
                                                            std::function<void()> on_done,
                                                            bool guest) {
  std::shared_ptr<GrpcWorkerChannel> self(
      new GrpcWorkerChannel(std::move(on_results), std::move(on_done)));
  self->stub_ = v1::Worker::NewStub(std::move(channel));
  // No deadline: the stream lasts as long as the worker is held.
  rpc::ConfigureClientContext(&self->context_, absl::InfiniteDuration());
  if (guest) self->context_.AddMetadata(worker::kGuestStreamKey, "1");
  rpc::KeepCallbackQueueForTheProcess();
  self->stub_->async()->PushTasks(&self->context_, self.get());
  self->StartRead(&self->incoming_);
  self->StartCall();
  return self;
}

void GrpcWorkerChannel::Send(v1::TaskBatch batch) {
  absl::MutexLock lock(&mu_);
  if (closing_ || broken_) return;  // the submitter learns of a dead worker from its exit
  if (pending_.tasks_size() == 0) {
    pending_ = std::move(batch);
  } else {
    for (v1::TaskSpec& task : *batch.mutable_tasks()) *pending_.add_tasks() = std::move(task);
  }
  if (!write_in_flight_) StartNextWriteLocked();
}

void GrpcWorkerChannel::StartNextWriteLocked() {
  if (broken_) return;
  if (pending_.tasks_size() > 0) {
    writing_ = std::move(pending_);
    pending_.Clear();
    write_in_flight_ = true;
    StartWrite(&writing_);
  } else if (closing_ && !writes_done_) {
    writes_done_ = true;
    write_in_flight_ = true;
    StartWritesDone();
  }
}

void GrpcWorkerChannel::Close() {
  absl::MutexLock lock(&mu_);
  closing_ = true;
  if (!write_in_flight_) StartNextWriteLocked();
}

void GrpcWorkerChannel::Cancel() { context_.TryCancel(); }

void SendCancelTask(v1::Worker::Stub& stub, const std::string& task_id, bool force,
                    bool recursive) {
  struct Call {
    grpc::ClientContext context;
    v1::CancelTaskRequest request;
    v1::CancelTaskReply reply;
  };
  auto* call = new Call();
  rpc::ConfigureClientContext(&call->context, absl::Seconds(10));
  call->request.set_task_id(task_id);
  call->request.set_force(force);
  call->request.set_recursive(recursive);
  // A worker that is gone cannot be cancelled: its death ends the task anyway.
  rpc::KeepCallbackQueueForTheProcess();
  stub.async()->CancelTask(&call->context, &call->request, &call->reply,
                           [call](grpc::Status) { delete call; });
}

void SendExitActor(v1::Worker::Stub& stub) {
  struct Call {
    grpc::ClientContext context;
    v1::ExitActorRequest request;
    v1::ExitActorReply reply;
  };
  auto* call = new Call();
  rpc::ConfigureClientContext(&call->context, absl::Seconds(10));
  call->request.set_from_owner(true);
  // A process that is gone has exited already.
  rpc::KeepCallbackQueueForTheProcess();
  stub.async()->ExitActor(&call->context, &call->request, &call->reply,
                          [call](grpc::Status) { delete call; });
}

void GrpcWorkerChannel::CancelTask(const std::string& task_id, bool force, bool recursive) {
  SendCancelTask(*stub_, task_id, force, recursive);
}

void GrpcWorkerChannel::ExitActor() { SendExitActor(*stub_); }

void GrpcWorkerChannel::OnWriteDone(bool ok) {
  absl::MutexLock lock(&mu_);
  write_in_flight_ = false;
  writing_.Clear();
  if (!ok) {
    broken_ = true;
    return;
  }
  StartNextWriteLocked();
}

void GrpcWorkerChannel::OnWritesDoneDone(bool) {
  absl::MutexLock lock(&mu_);
  write_in_flight_ = false;
}

void GrpcWorkerChannel::OnReadDone(bool ok) {
  if (!ok) {
    absl::MutexLock lock(&mu_);
    broken_ = true;
    return;
  }
  on_results_(incoming_);
  incoming_.Clear();
  StartRead(&incoming_);
}

void GrpcWorkerChannel::OnDone(const grpc::Status&) {
  on_done_();
  absl::MutexLock lock(&mu_);
  done_ = true;
}

bool GrpcWorkerChannel::done() {
  absl::MutexLock lock(&mu_);
  return done_;
}

}  // namespace tessera::api
