#include "timeline/chrome_trace.h"

#include <algorithm>
#include <map>
#include <utility>

#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "rpc/state_names.h"

namespace tessera::timeline {
namespace {

using nlohmann::json;

json Metadata(const std::string& what, int pid, std::optional<int> tid, json args) {
  json event = {{"ph", "M"}, {"name", what}, {"pid", pid}, {"args", std::move(args)}};
  if (tid.has_value()) event["tid"] = *tid;
  return event;
}

json Span(const std::string& name, const std::string& category, int pid, int tid, int64_t start_us,
          int64_t end_us, json args) {
  return {{"ph", "X"},
          {"name", name},
          {"cat", category},
          {"pid", pid},
          {"tid", tid},
          {"ts", start_us},
          {"dur", std::max<int64_t>(end_us - start_us, 0)},
          {"args", std::move(args)}};
}

json Instant(const std::string& name, const std::string& category, int pid, int tid, int64_t at_us,
             json args) {
  return {{"ph", "i"},  {"s", "t"},   {"name", name}, {"cat", category},
          {"pid", pid}, {"tid", tid}, {"ts", at_us},  {"args", std::move(args)}};
}

// Catapult's colour names for how a run ended ("" : the viewer's own colour by name).
std::string ColourOf(const std::string& outcome) {
  if (outcome == "ok") return "";
  if (absl::StartsWith(outcome, "retried")) return "bad";
  if (outcome == "cancelled") return "grey";
  return "terrible";
}

void AddGang(const v1::JobStatus& gang, int64_t now_us, json& events) {
  constexpr int kPid = 1;
  events.push_back(
      Metadata("process_name", kPid, std::nullopt,
               {{"name", gang.name().empty()
                             ? absl::StrCat("Job ", gang.job_id())
                             : absl::StrCat("Job ", gang.job_id(), " (", gang.name(), ")")}}));
  events.push_back(Metadata("process_sort_index", kPid, std::nullopt, {{"sort_index", 0}}));
  events.push_back(Metadata("thread_name", kPid, 0, {{"name", "phases"}}));
  for (const v1::JobPhase& phase : gang.phases()) {
    const int64_t start = phase.start_time_ms() * 1000;
    json args = {{"message", phase.message()}, {"attempt", phase.attempt()}};
    const bool open = phase.end_time_ms() == 0;
    const int64_t end = open ? now_us : phase.end_time_ms() * 1000;
    const std::string state(rpc::GangJobStateName(phase.state()));
    if (!open && end <= start) {
      events.push_back(Instant(state, "phase", kPid, 0, start, std::move(args)));
    } else {
      events.push_back(Span(state, "phase", kPid, 0, start, end, std::move(args)));
    }
  }
  std::map<int, bool> named;  // rank -> its row is named
  auto add_rank = [&](const v1::RankStatus& rank) {
    const int tid = rank.rank() + 1;
    if (!named[rank.rank()]) {
      named[rank.rank()] = true;
      events.push_back(
          Metadata("thread_name", kPid, tid, {{"name", absl::StrCat("rank ", rank.rank())}}));
      events.push_back(Metadata("thread_sort_index", kPid, tid, {{"sort_index", tid}}));
    }
    if (rank.start_time_ms() == 0) return;  // never launched
    const int64_t end = rank.end_time_ms() == 0 ? now_us : rank.end_time_ms() * 1000;
    json span = Span(absl::StrCat("rank ", rank.rank(), " attempt ", rank.attempt()), "rank", kPid,
                     tid, rank.start_time_ms() * 1000, end,
                     {{"node_id", rank.node_id()},
                      {"host", rank.host()},
                      {"pid", rank.pid()},
                      {"state", std::string(rpc::RankStateName(rank.state()))},
                      {"exit_reason", rank.exit_reason()},
                      {"attempt", rank.attempt()}});
    if (rank.state() == v1::RANK_STATE_FAILED) span["cname"] = "terrible";
    events.push_back(std::move(span));
  };
  for (const v1::RankStatus& rank : gang.past_ranks()) add_rank(rank);
  for (const v1::RankStatus& rank : gang.ranks()) add_rank(rank);
}

}  // namespace

json ChromeTrace(const TimelineInput& input) {
  const int64_t now_us = absl::ToUnixMicros(input.now);
  json events = json::array();
  if (input.gang.has_value()) AddGang(*input.gang, now_us, events);
  // Nodes in id order, workers in id order within each: stable rows run after run.
  std::map<std::string, std::map<std::string, int>> rows;  // node -> worker -> pid of the worker
  for (const v1::TaskEvent& task : input.tasks)
    rows[task.node_id()][task.worker_id()] = task.worker_pid();
  std::map<std::string, int> node_pid;
  std::map<std::pair<std::string, std::string>, int> worker_tid;
  int next_pid = 2;  // 1 is the gang's
  for (const auto& [node, workers] : rows) {
    const int pid = next_pid++;
    node_pid[node] = pid;
    events.push_back(
        Metadata("process_name", pid, std::nullopt,
                 {{"name", node.empty() ? "Node (unknown)" : absl::StrCat("Node ", node)}}));
    events.push_back(Metadata("process_sort_index", pid, std::nullopt, {{"sort_index", pid}}));
    int next_tid = 1;
    for (const auto& [worker, worker_pid] : workers) {
      const int tid = next_tid++;
      worker_tid[{node, worker}] = tid;
      events.push_back(Metadata(
          "thread_name", pid, tid,
          {{"name", worker_pid > 0 ? absl::StrCat("worker ", worker, " (pid ", worker_pid, ")")
                                   : absl::StrCat("worker ", worker)}}));
    }
  }
  for (const v1::TaskEvent& task : input.tasks) {
    const int pid = node_pid[task.node_id()];
    const int tid = worker_tid[{task.node_id(), task.worker_id()}];
    json args = {{"task_id", absl::BytesToHexString(task.task_id())},
                 {"job_id", input.job_id},
                 {"attempt", task.attempt()},
                 {"outcome", task.outcome()}};
    if (!task.actor_id().empty()) args["actor_id"] = absl::BytesToHexString(task.actor_id());
    const std::string category = task.kind().empty() ? "task" : task.kind();
    json event;
    if (task.start_time_us() > 0) {
      if (task.submit_time_us() > 0 && task.submit_time_us() <= task.start_time_us()) {
        args["queued_ms"] =
            static_cast<double>(task.start_time_us() - task.submit_time_us()) / 1000;
      }
      event = Span(task.name(), category, pid, tid, task.start_time_us(),
                   std::max(task.end_time_us(), task.start_time_us()), std::move(args));
    } else {
      event = Instant(task.name(), category, pid, tid, task.end_time_us(), std::move(args));
    }
    if (std::string colour = ColourOf(task.outcome()); !colour.empty()) event["cname"] = colour;
    events.push_back(std::move(event));
  }
  return {{"traceEvents", std::move(events)},
          {"displayTimeUnit", "ms"},
          {"otherData",
           {{"job_id", input.job_id},
            {"dropped_task_runs", input.dropped},
            {"written_by", "tessera timeline"}}}};
}

size_t CountTraceEvents(const json& trace) {
  size_t count = 0;
  for (const json& event : trace.at("traceEvents")) {
    if (event.value("ph", "") != "M") ++count;
  }
  return count;
}

}  // namespace tessera::timeline
