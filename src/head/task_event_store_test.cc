#include "head/task_event_store.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace tessera {
namespace {

std::vector<v1::TaskEvent> Runs(const std::vector<std::string>& names,
                                const std::string& outcome = "ok",
                                const std::string& kind = "task") {
  std::vector<v1::TaskEvent> events;
  for (const std::string& name : names) {
    v1::TaskEvent& event = events.emplace_back();
    event.set_name(name);
    event.set_kind(kind);
    event.set_outcome(outcome);
  }
  return events;
}

std::vector<std::string> Names(const TaskEventPage& page) {
  std::vector<std::string> names;
  for (const v1::TaskEvent& event : page.events) names.push_back(event.name());
  return names;
}

TEST(TaskEventStoreTest, AReaderPagesThroughAJobsRunsInTheOrderReported) {
  TaskEventStore store;
  store.Report("job-a", Runs({"f", "g"}), 0);
  store.Report("job-a", Runs({"h"}), 0);
  TaskEventPage first = store.Get("job-a", 0, 2);
  EXPECT_EQ(first.job_id, "job-a");
  EXPECT_EQ(Names(first), (std::vector<std::string>{"f", "g"}));
  EXPECT_TRUE(first.more);
  TaskEventPage rest = store.Get("job-a", first.next, 10);
  EXPECT_EQ(Names(rest), (std::vector<std::string>{"h"}));
  EXPECT_FALSE(rest.more);
  EXPECT_TRUE(store.Get("job-a", rest.next, 10).events.empty());
  // An unknown job: an empty page naming no job.
  TaskEventPage none = store.Get("job-x", 0, 10);
  EXPECT_EQ(none.job_id, "");
  EXPECT_TRUE(none.events.empty());
}

TEST(TaskEventStoreTest, NoJobNamedMeansTheJobThatReportedLast) {
  TaskEventStore store;
  store.Report("job-a", Runs({"f"}), 0);
  store.Report("job-b", Runs({"g"}), 0);
  EXPECT_EQ(store.Get("", 0, 10).job_id, "job-b");
  store.Report("job-a", Runs({"h"}), 0);
  EXPECT_EQ(store.Get("", 0, 10).job_id, "job-a");
}

TEST(TaskEventStoreTest, TheOldestRunsAndTheLeastRecentJobsAreLetGoAndCounted) {
  TaskEventStore store({.max_per_job = 2, .max_jobs = 2});
  store.Report("job-a", Runs({"f1", "f2", "f3"}), /*dropped=*/4);
  TaskEventPage page = store.Get("job-a", 0, 10);
  EXPECT_EQ(Names(page), (std::vector<std::string>{"f2", "f3"}));
  EXPECT_EQ(page.dropped, 5);  // four the driver dropped, one let go here
  EXPECT_EQ(page.next, 3);     // indices stay those of the whole job
  store.Report("job-b", Runs({"g"}), 0);
  store.Report("job-a", Runs({"f4"}), 0);  // job-a reported last: job-b is the older
  store.Report("job-c", Runs({"h"}), 0);
  EXPECT_EQ(store.Get("job-b", 0, 10).job_id, "");
  EXPECT_EQ(Names(store.Get("job-a", 3, 10)), (std::vector<std::string>{"f4"}));
}

TEST(TaskEventStoreTest, RunsAreCountedByKindAndOutcomeClass) {
  TaskEventStore store;
  store.Report("j", Runs({"f", "g"}), 0);
  store.Report("j", Runs({"f"}, "error: ValueError"), 0);
  store.Report("j", Runs({"m"}, "worker died: killed by signal 9 (SIGKILL)", "actor_call"), 0);
  auto counts = store.Counts();
  EXPECT_EQ((counts[{"task", "ok"}]), 2);
  EXPECT_EQ((counts[{"task", "error"}]), 1);
  EXPECT_EQ((counts[{"actor_call", "worker_died"}]), 1);
  EXPECT_EQ(OutcomeClass("cancelled"), "cancelled");
  EXPECT_EQ(OutcomeClass("retried: OSError"), "retried");
  EXPECT_EQ(OutcomeClass("okay"), "other");
}

}  // namespace
}  // namespace tessera
