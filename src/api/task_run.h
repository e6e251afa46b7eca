// TaskRun: one ended run of a task, actor constructor or actor call, as the submitter records it
// for timelines. Plain values, so recording a run costs no allocation in the common case: ids
// held inline, the function's name and the worker's identity shared, the outcome an enum (words
// only for failures). It becomes a v1::TaskEvent only when the reporter sends it (ToTaskEvent).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "absl/container/inlined_vector.h"
#include "tessera/object_id.h"
#include "tessera/v1/head.pb.h"
#include "tessera/v1/worker.pb.h"

namespace tessera::api {

// Who a leased worker is, for the timelines of the runs it serves.
struct WorkerIdentity {
  std::string node_id;
  std::string worker_id;
  int pid = 0;
};

// Task and actor ids as the specs carry them (binary, TaskId::kSize bytes), held inline.
using RunId = absl::InlinedVector<char, TaskId::kSize>;
inline RunId ToRunId(std::string_view bytes) { return RunId(bytes.begin(), bytes.end()); }

struct TaskRun {
  enum class Outcome : uint8_t {
    kOk,
    kError,       // detail: the exception type (or the error's kind)
    kRetried,     // failed and runs again; detail as kError
    kWorkerDied,  // detail: the cause
    kCancelled,
  };
  RunId task_id;
  RunId actor_id;  // empty for a plain task
  v1::TaskKind kind = v1::TASK;
  int32_t attempt = 0;
  std::shared_ptr<const std::string> name;  // the function's, or the method's
  std::shared_ptr<const WorkerIdentity> worker;
  int64_t submit_time_us = 0;
  int64_t start_time_us = 0;  // 0: never began
  int64_t end_time_us = 0;
  Outcome outcome = Outcome::kOk;
  std::string detail;
};

// The run in the wire form (TaskEvent.kind and .outcome in words: "task", "actor_create",
// "actor_call"; "ok", "error: T", "retried: T", "worker died: cause", "cancelled").
void ToTaskEvent(const TaskRun& run, v1::TaskEvent* event);

}  // namespace tessera::api
