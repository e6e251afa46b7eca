#include "train/job_changes.h"

#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"

namespace tessera::train {
namespace {

using Changes = std::vector<std::pair<std::string, std::string>>;

v1::JobStatus Job(v1::GangJobState state, int ranks, int attempt = 0) {
  v1::JobStatus status;
  status.set_job_id("j-1");
  status.set_name("bert");
  status.set_state(state);
  for (int r = 0; r < ranks; ++r) {
    v1::RankStatus* rank = status.add_ranks();
    rank->set_rank(r);
    rank->set_attempt(attempt);
    rank->set_node_id(absl::StrCat("n", r));
    rank->set_state(v1::RANK_STATE_RUNNING);
  }
  return status;
}

TEST(JobChangesTest, AStateEnteredIsAJobEvent) {
  v1::JobStatus after = Job(v1::GANG_JOB_STATE_RUNNING, 2);
  after.set_message("2 ranks running on j-1-attempt-0");
  EXPECT_EQ(JobChanges(Job(v1::GANG_JOB_STATE_STARTING, 2), after),
            (Changes{{"job", "job j-1 (bert) RUNNING: 2 ranks running on j-1-attempt-0"}}));
  // The same state again (a rank's change) says nothing of the job.
  EXPECT_TRUE(JobChanges(after, after).empty());
}

TEST(JobChangesTest, ARankThatFailedIsAWorkerEventOnce) {
  v1::JobStatus before = Job(v1::GANG_JOB_STATE_RUNNING, 3);
  v1::JobStatus after = before;
  after.mutable_ranks(1)->set_state(v1::RANK_STATE_FAILED);
  after.mutable_ranks(1)->set_exit_reason("killed by signal 9 (SIGKILL)");
  EXPECT_EQ(
      JobChanges(before, after),
      (Changes{{"worker", "job j-1 rank 1 on node n1 FAILED: killed by signal 9 (SIGKILL)"}}));
  // Published again with another change: not told twice.
  v1::JobStatus later = after;
  later.set_state(v1::GANG_JOB_STATE_RESTARTING);
  EXPECT_EQ(JobChanges(after, later), (Changes{{"job", "job j-1 (bert) RESTARTING"}}));
  // The next attempt's rank 1 failing is a new failure.
  v1::JobStatus next = Job(v1::GANG_JOB_STATE_RUNNING, 3, /*attempt=*/1);
  v1::JobStatus next_failed = next;
  next_failed.mutable_ranks(1)->set_state(v1::RANK_STATE_FAILED);
  EXPECT_EQ(JobChanges(after, next_failed).size(), 1u);
}

TEST(JobChangesTest, ManyFailedRanksAreCountedPastTheBound) {
  v1::JobStatus before = Job(v1::GANG_JOB_STATE_RUNNING, 20);
  v1::JobStatus after = before;
  for (v1::RankStatus& rank : *after.mutable_ranks()) rank.set_state(v1::RANK_STATE_FAILED);
  Changes changes = JobChanges(before, after);
  ASSERT_EQ(changes.size(), static_cast<size_t>(kMaxRankEvents + 1));
  EXPECT_EQ(changes.back(),
            (std::pair<std::string, std::string>{"worker", "job j-1: 12 more ranks FAILED"}));
}

}  // namespace
}  // namespace tessera::train
