// Fakes for TaskSubmitter's tests: a lease source that records what was asked, and a worker
// channel that records what was sent. Thread-compatible (one test thread).
#pragma once

#include <set>
#include <string>
#include <utility>
#include <vector>

#include "api/task_submitter.h"

namespace tessera::api {

class FakeLeases : public LeaseSource {
 public:
  void RequestWorker(const LeaseShape& shape) override { requests.push_back(shape.key); }
  bool ReturnLease(WorkerHandle worker) override {
    returned.push_back(worker);
    return can_return;
  }
  std::vector<std::string> requests;
  std::vector<WorkerHandle> returned;  // every ReturnLease, in order
  bool can_return = true;              // what ReturnLease answers
};

class FakeChannel : public WorkerChannel {
 public:
  void Send(v1::TaskBatch batch) override {
    for (const auto& t : batch.tasks()) sent.push_back(t);
    batches.push_back(std::move(batch));
  }
  void Close() override { closed = true; }
  void ExitActor() override { exit_asked = true; }
  void CancelTask(const std::string& task_id, bool force, bool recursive) override {
    cancels.push_back({task_id, force, recursive});
  }
  struct CancelAsk {
    std::string task_id;
    bool force = false;
    bool recursive = false;
  };
  std::vector<CancelAsk> cancels;  // every CancelTask, in order
  // Every task sent and not yet answered, in order.
  std::vector<v1::TaskSpec> Unanswered() const {
    std::vector<v1::TaskSpec> out;
    for (const auto& t : sent) {
      if (answered.count(t.task_id()) == 0) out.push_back(t);
    }
    return out;
  }

  std::vector<v1::TaskBatch> batches;
  std::vector<v1::TaskSpec> sent;  // the tasks of every batch, in order
  std::set<std::string> answered;  // task ids the test has answered
  bool closed = false;
  bool exit_asked = false;  // ExitActor was called
};

}  // namespace tessera::api
