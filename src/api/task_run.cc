#include "api/task_run.h"

#include "absl/strings/str_cat.h"

namespace tessera::api {
namespace {

const char* KindWord(v1::TaskKind kind) {
  switch (kind) {
    case v1::ACTOR_CREATE: return "actor_create";
    case v1::ACTOR_METHOD: return "actor_call";
    default: return "task";
  }
}

std::string OutcomeWords(const TaskRun& run) {
  switch (run.outcome) {
    case TaskRun::Outcome::kOk: return "ok";
    case TaskRun::Outcome::kError: return absl::StrCat("error: ", run.detail);
    case TaskRun::Outcome::kRetried: return absl::StrCat("retried: ", run.detail);
    case TaskRun::Outcome::kWorkerDied: return absl::StrCat("worker died: ", run.detail);
    case TaskRun::Outcome::kCancelled: return "cancelled";
  }
  return "ok";
}

}  // namespace

void ToTaskEvent(const TaskRun& run, v1::TaskEvent* event) {
  event->set_task_id(run.task_id.data(), run.task_id.size());
  if (run.name != nullptr) event->set_name(*run.name);
  event->set_kind(KindWord(run.kind));
  event->set_actor_id(run.actor_id.data(), run.actor_id.size());
  event->set_attempt(run.attempt);
  if (run.worker != nullptr) {
    event->set_node_id(run.worker->node_id);
    event->set_worker_id(run.worker->worker_id);
    event->set_worker_pid(run.worker->pid);
  }
  event->set_submit_time_us(run.submit_time_us);
  event->set_start_time_us(run.start_time_us);
  event->set_end_time_us(run.end_time_us);
  event->set_outcome(OutcomeWords(run));
}

}  // namespace tessera::api
