#include "timeline/chrome_trace.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace tessera::timeline {
namespace {

using nlohmann::json;

v1::TaskEvent TaskRun(const std::string& name, const std::string& node, const std::string& worker,
                      int64_t start_us, int64_t end_us, const std::string& outcome = "ok") {
  v1::TaskEvent event;
  event.set_task_id(std::string("\x01\xab", 2));
  event.set_name(name);
  event.set_kind("task");
  event.set_node_id(node);
  event.set_worker_id(worker);
  event.set_worker_pid(4242);
  event.set_submit_time_us(start_us - 500);
  event.set_start_time_us(start_us);
  event.set_end_time_us(end_us);
  event.set_outcome(outcome);
  return event;
}

// The non-metadata events, and the names metadata gives each (pid, tid).
std::vector<json> Events(const json& trace, const std::string& ph) {
  std::vector<json> out;
  for (const json& event : trace["traceEvents"]) {
    if (event["ph"] == ph) out.push_back(event);
  }
  return out;
}

std::string NameOf(const json& trace, const std::string& what, int pid, int tid = -1) {
  for (const json& event : trace["traceEvents"]) {
    if (event["ph"] != "M" || event["name"] != what || event["pid"] != pid) continue;
    if (tid >= 0 && (!event.contains("tid") || event["tid"] != tid)) continue;
    return event["args"]["name"];
  }
  return "";
}

TEST(ChromeTraceTest, TaskRunsAreSpansOnTheirWorkersRowUnderTheirNode) {
  TimelineInput input;
  input.job_id = "driver-1";
  input.tasks = {TaskRun("square", "n2", "w-b", 1'000'000, 1'002'500),
                 TaskRun("square", "n1", "w-a", 1'000'100, 1'000'200),
                 TaskRun("boom", "n1", "w-a", 1'000'300, 1'000'400, "error: ValueError")};
  v1::TaskEvent call = TaskRun("Counter.add", "n1", "w-c", 1'000'500, 1'000'600);
  call.set_kind("actor_call");
  call.set_actor_id("\xff");
  input.tasks.push_back(call);
  v1::TaskEvent lost =
      TaskRun("slow", "n2", "w-b", 0, 1'003'000, "worker died: killed by signal 9");
  input.tasks.push_back(lost);
  input.now = absl::FromUnixMicros(2'000'000);
  const json trace = ChromeTrace(input);
  EXPECT_EQ(trace["displayTimeUnit"], "ms");
  EXPECT_EQ(trace["otherData"]["job_id"], "driver-1");
  // Nodes in id order from pid 2; workers in id order from tid 1.
  EXPECT_EQ(NameOf(trace, "process_name", 2), "Node n1");
  EXPECT_EQ(NameOf(trace, "process_name", 3), "Node n2");
  EXPECT_EQ(NameOf(trace, "thread_name", 2, 1), "worker w-a (pid 4242)");
  EXPECT_EQ(NameOf(trace, "thread_name", 2, 2), "worker w-c (pid 4242)");
  EXPECT_EQ(NameOf(trace, "thread_name", 3, 1), "worker w-b (pid 4242)");
  std::vector<json> spans = Events(trace, "X");
  ASSERT_EQ(spans.size(), 4u);
  EXPECT_EQ(spans[0]["name"], "square");
  EXPECT_EQ(spans[0]["cat"], "task");
  EXPECT_EQ(spans[0]["pid"], 3);
  EXPECT_EQ(spans[0]["tid"], 1);
  EXPECT_EQ(spans[0]["ts"], 1'000'000);
  EXPECT_EQ(spans[0]["dur"], 2'500);
  EXPECT_EQ(spans[0]["args"]["task_id"], "01ab");
  EXPECT_EQ(spans[0]["args"]["job_id"], "driver-1");
  EXPECT_EQ(spans[0]["args"]["queued_ms"], 0.5);
  EXPECT_FALSE(spans[0].contains("cname"));
  EXPECT_EQ(spans[2]["cname"], "terrible");
  EXPECT_EQ(spans[2]["args"]["outcome"], "error: ValueError");
  EXPECT_EQ(spans[3]["cat"], "actor_call");
  EXPECT_EQ(spans[3]["args"]["actor_id"], "ff");
  // A run lost before it was heard to start: an instant at its end, on its worker's row.
  std::vector<json> instants = Events(trace, "i");
  ASSERT_EQ(instants.size(), 1u);
  EXPECT_EQ(instants[0]["name"], "slow");
  EXPECT_EQ(instants[0]["ts"], 1'003'000);
  EXPECT_EQ(instants[0]["pid"], 3);
  EXPECT_EQ(CountTraceEvents(trace), 5u);
}

TEST(ChromeTraceTest, AGangsPhasesAndEveryAttemptOfItsRanksHaveRowsOfTheirOwn) {
  TimelineInput input;
  input.job_id = "j-1";
  input.now = absl::FromUnixMillis(9'000);
  v1::JobStatus gang;
  gang.set_job_id("j-1");
  gang.set_name("bert");
  auto phase = [&](v1::GangJobState state, int64_t start, int64_t end, int attempt) {
    v1::JobPhase* p = gang.add_phases();
    p->set_state(state);
    p->set_start_time_ms(start);
    p->set_end_time_ms(end);
    p->set_attempt(attempt);
  };
  phase(v1::GANG_JOB_STATE_PENDING, 1'000, 1'200, 0);
  phase(v1::GANG_JOB_STATE_STARTING, 1'200, 1'500, 0);
  phase(v1::GANG_JOB_STATE_RUNNING, 1'500, 4'000, 0);
  phase(v1::GANG_JOB_STATE_RESTARTING, 4'000, 4'300, 1);
  phase(v1::GANG_JOB_STATE_RUNNING, 4'300, 0, 1);  // still running
  auto rank = [](v1::RankStatus* r, int number, int attempt, int64_t start, int64_t end,
                 v1::RankState state) {
    r->set_rank(number);
    r->set_attempt(attempt);
    r->set_node_id("w0");
    r->set_start_time_ms(start);
    r->set_end_time_ms(end);
    r->set_state(state);
  };
  rank(gang.add_past_ranks(), 0, 0, 1'200, 4'000, v1::RANK_STATE_STOPPED);
  rank(gang.add_past_ranks(), 1, 0, 1'200, 3'900, v1::RANK_STATE_FAILED);
  rank(gang.add_ranks(), 0, 1, 4'300, 0, v1::RANK_STATE_RUNNING);
  rank(gang.add_ranks(), 1, 1, 4'300, 0, v1::RANK_STATE_RUNNING);
  input.gang = gang;
  const json trace = ChromeTrace(input);
  EXPECT_EQ(NameOf(trace, "process_name", 1), "Job j-1 (bert)");
  EXPECT_EQ(NameOf(trace, "thread_name", 1, 0), "phases");
  EXPECT_EQ(NameOf(trace, "thread_name", 1, 1), "rank 0");
  EXPECT_EQ(NameOf(trace, "thread_name", 1, 2), "rank 1");
  std::vector<json> spans = Events(trace, "X");
  ASSERT_EQ(spans.size(), 9u);  // 5 phases, 4 rank attempts
  EXPECT_EQ(spans[0]["name"], "PENDING");
  EXPECT_EQ(spans[0]["ts"], 1'000'000);
  EXPECT_EQ(spans[0]["dur"], 200'000);
  EXPECT_EQ(spans[4]["name"], "RUNNING");
  EXPECT_EQ(spans[4]["dur"], 4'700'000);  // open: ends now
  EXPECT_EQ(spans[6]["name"], "rank 1 attempt 0");
  EXPECT_EQ(spans[6]["tid"], 2);
  EXPECT_EQ(spans[6]["cname"], "terrible");
  EXPECT_EQ(spans[6]["args"]["state"], "FAILED");  // the word people read
  EXPECT_EQ(spans[8]["name"], "rank 1 attempt 1");
  EXPECT_EQ(spans[8]["dur"], 4'700'000);
  // An end state (no length) is an instant.
  v1::JobPhase* end = gang.add_phases();
  end->set_state(v1::GANG_JOB_STATE_SUCCEEDED);
  end->set_start_time_ms(9'000);
  end->set_end_time_ms(9'000);
  input.gang = gang;
  std::vector<json> instants = Events(ChromeTrace(input), "i");
  ASSERT_EQ(instants.size(), 1u);
  EXPECT_EQ(instants[0]["name"], "SUCCEEDED");
}

}  // namespace
}  // namespace tessera::timeline
