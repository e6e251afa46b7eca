// ChromeTrace: a job's timeline in the Chrome trace event format, which Perfetto
// (ui.perfetto.dev) and chrome://tracing open. What `tessera timeline JOB -o trace.json` writes:
//   {"traceEvents": [...], "displayTimeUnit": "ms", "otherData": {job_id, dropped, ...}}
// Rows (pid = a group, tid = a row, each named by "M" metadata events):
// - a gang job's group, first: a "phases" row with one span per state it went through (PENDING,
//   STARTING, RUNNING, RESTARTING; its end state an instant), then a row per rank with a span
//   per attempt ("rank 2 attempt 1": node, pid, how it ended; failed ones coloured "terrible");
// - a group per node ("Node <id>"), a row per worker ("worker <id> (pid N)"), a span per task
//   run, actor constructor or actor call ("X", cat "task" / "actor_create" / "actor_call",
//   name the function, args: task_id, job_id, attempt, actor_id, outcome, queued_ms); failed
//   runs coloured "terrible", retried ones "bad", cancelled ones "grey"; a run lost with its
//   worker before it was heard to start is an instant at its end.
// Times are Unix microseconds ("ts", "dur"), as the head has them; spans still open end at `now`.
// Pure and thread-safe. Cost: O(events log events).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "nlohmann/json.hpp"
#include "tessera/v1/head.pb.h"
#include "tessera/v1/jobs.pb.h"

namespace tessera::timeline {

struct TimelineInput {
  std::string job_id;
  std::vector<v1::TaskEvent> tasks;
  std::optional<v1::JobStatus> gang;  // the gang job of that id, when it is one
  int64_t dropped = 0;                // runs the head does not have (GetTaskEventsResponse)
  absl::Time now;                     // where open spans end
};

nlohmann::json ChromeTrace(const TimelineInput& input);

// The number of events that are not metadata ("M"): what a user would count.
size_t CountTraceEvents(const nlohmann::json& trace);

}  // namespace tessera::timeline
