// What the head's unit tests share: a fake node agent that holds what the head prepares and
// commits, with hooks to fail or hold a round.
#pragma once

#include <functional>
#include <map>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "hardware/node_label_keys.h"
#include "head/node_agent_client.h"
#include "labels/label.h"
#include "wire/proto_convert.h"

namespace tessera::head_testing {

// The labels of worker `worker` of `slice`, a TPU v6e 4x4 slice (4 hosts of 4 chips).
inline LabelSet V6e4x4HostLabels(const std::string& slice, int worker) {
  return LabelSet{{std::string(labels::kTpuSliceName), slice},
                  {std::string(labels::kTpuWorkerId), std::to_string(worker)},
                  {std::string(labels::kTpuTopology), "4x4"},
                  {std::string(labels::kTpuPodType), "v6e-16"},
                  {std::string(labels::kAcceleratorType), "TPU-V6E"}};
}

// Sets the shape of a v6e 4x4 slice on a request's alternative.
inline void SetV6e4x4(v1::SliceAlternative* alt) {
  wire::SliceShapeToProto(*MakeSliceShape(TpuGeneration::kV6e, {{4, 4}}), alt->mutable_shape());
}

// A node agent that keeps the bundles the head prepares and commits (in one step when the
// prepare says so), and fails on demand.
// Thread-safe.
class FakeAgent : public NodeAgentClient {
 public:
  struct Held {
    bool committed = false;
    wire::ExactAllocation allocation;
  };

  absl::Status Prepare(const v1::PrepareBundlesRequest& request) override {
    std::function<void()> hook;
    {
      absl::MutexLock lock(&mu_);
      hook = on_prepare_;
    }
    if (hook) hook();  // while the head's round is in flight
    absl::MutexLock lock(&mu_);
    ++prepares_;
    if (!fail_prepare_.ok()) return fail_prepare_;
    for (const auto& bundle : request.bundles()) {
      held_[{request.placement_group(), bundle.bundle_index()}] =
          Held{request.commit(), *wire::AllocationFromProto(bundle.allocation())};
    }
    return absl::OkStatus();
  }
  absl::Status Commit(const v1::CommitBundlesRequest& request) override {
    absl::MutexLock lock(&mu_);
    ++commits_;
    if (!fail_commit_.ok()) return fail_commit_;
    for (int index : request.bundle_indices()) {
      auto it = held_.find({request.placement_group(), index});
      if (it == held_.end()) return absl::FailedPreconditionError("commit without prepare");
      it->second.committed = true;
    }
    return absl::OkStatus();
  }
  absl::Status Cancel(const v1::CancelBundlesRequest& request) override {
    absl::MutexLock lock(&mu_);
    ++cancels_;
    for (int index : request.bundle_indices()) held_.erase({request.placement_group(), index});
    return absl::OkStatus();
  }

  void FailPrepare(absl::Status status) {
    absl::MutexLock lock(&mu_);
    fail_prepare_ = std::move(status);
  }
  // Runs `hook` at the start of every prepare, outside the fake's lock.
  void OnPrepare(std::function<void()> hook) {
    absl::MutexLock lock(&mu_);
    on_prepare_ = std::move(hook);
  }
  void FailCommit(absl::Status status) {
    absl::MutexLock lock(&mu_);
    fail_commit_ = std::move(status);
  }
  std::map<std::pair<std::string, int>, Held> held() const {
    absl::MutexLock lock(&mu_);
    return held_;
  }
  int prepares() const {
    absl::MutexLock lock(&mu_);
    return prepares_;
  }
  int cancels() const {
    absl::MutexLock lock(&mu_);
    return cancels_;
  }

 private:
  mutable absl::Mutex mu_;
  absl::Status fail_prepare_;
  absl::Status fail_commit_;
  std::function<void()> on_prepare_;
  std::map<std::pair<std::string, int>, Held> held_;
  int prepares_ = 0;
  int commits_ = 0;
  int cancels_ = 0;
};

}  // namespace tessera::head_testing
