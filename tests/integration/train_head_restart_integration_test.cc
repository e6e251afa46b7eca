// A training job survives its head: a 2-rank torch (gloo, CPU) job runs on a cluster whose head
// keeps its state in a real redis-server; the head is SIGKILLed mid-run and started again, and
// the job's ranks go on untouched (same pids, no restart), their output from while the head was
// gone reaches the job's log once, and the job ends SUCCEEDED, all seen through `tessera job`;
// the next head still lists the ended job (docs/train.md, "Head restarts").
//
// The ranks pass gates (files the test writes) instead of sleeping, so the head is down while
// they run and print, whatever the machine's speed.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "head/redis_test_server.h"
#include "integration/cluster_harness.h"

namespace tessera::testing {
namespace {

using ::testing::HasSubstr;
using Json = nlohmann::json;

// Steps 0-2, then (gate "head-killed") steps 3-5 while the head is down and a file saying so,
// then (gate "head-back") steps 6-8; every step is an all_reduce both ranks take part in.
constexpr char kScript[] = R"(import os, sys, time
import torch
import torch.distributed as dist

gates = sys.argv[1]
dist.init_process_group("gloo")
rank = dist.get_rank()

def wait_for(name):
    while not os.path.exists(os.path.join(gates, name)):
        time.sleep(0.05)

for step in range(9):
    if step == 3:
        wait_for("head-killed")
    if step == 6:
        open(os.path.join(gates, f"rank-{rank}-ran-headless"), "w").close()
        wait_for("head-back")
    total = torch.tensor([step + 1.0])
    dist.all_reduce(total)
    print(f"rank {rank} pid {os.getpid()} step {step} sum {int(total.item())}", flush=True)
dist.destroy_process_group()
print(f"rank {rank} done", flush=True)
)";

absl::StatusOr<Json> JobStatusJson(const TestCluster& c, const std::string& job) {
  const CliResult r = c.Cli({"job", "status", job, "--json"});
  if (r.exit_code != 0) return absl::UnavailableError(Describe(r));
  Json status = Json::parse(r.out, nullptr, /*allow_exceptions=*/false);
  if (status.is_discarded()) return absl::InternalError(absl::StrCat("not JSON: ", r.out));
  return status;
}

std::map<int, int> RankPids(const Json& status) {
  std::map<int, int> pids;
  for (const Json& rank : status.value("ranks", Json::array())) {
    pids[rank.value("rank", 0)] = rank.value("pid", 0);
  }
  return pids;
}

int Occurrences(const std::string& text, const std::string& needle) {
  int n = 0;
  for (size_t at = text.find(needle); at != std::string::npos; at = text.find(needle, at + 1)) ++n;
  return n;
}

absl::Status AwaitFile(TestCluster& c, const std::string& path) {
  return c.WaitUntil(
      [&]() -> absl::Status {
        return std::filesystem::exists(path) ? absl::OkStatus()
                                             : absl::UnavailableError(absl::StrCat("no ", path));
      },
      absl::Seconds(120));
}

TEST(TrainHeadRestartTest, ATrainingJobRunsOnThroughAHeadRestartWithTheSameRanks) {
  if (auto found = FindRedisServer(); !found.ok()) {
    GTEST_SKIP() << "no redis-server to keep the head's state in: " << found.status();
  }
  if (!std::filesystem::exists("/usr/bin/python3")) GTEST_SKIP() << "no /usr/bin/python3";
  auto redis = RedisTestServer::Create();
  ASSERT_OK(redis.status());
  ClusterOptions options;
  options.head_extra_args = {"--redis-address", (*redis)->address()};
  options.nodes.push_back({.id = "n1", .hardware_yaml = CpuHost(4)});
  auto cluster = TestCluster::Start(options);
  ASSERT_OK(cluster.status());
  TestCluster& c = **cluster;
  const std::string gates = absl::StrCat(c.state_dir(), "/test-logs/gates");
  std::filesystem::create_directories(gates);
  const std::string script = absl::StrCat(c.state_dir(), "/test-logs/train.py");
  std::ofstream(script) << kScript;

  const CliResult submitted = c.Cli({"train", "--workers", "2", "--detach", "--name", "survivor",
                                     "--", "/usr/bin/python3", script, gates});
  ASSERT_EQ(submitted.exit_code, 0) << Describe(submitted);
  const std::string job(absl::StripAsciiWhitespace(submitted.out));
  ASSERT_FALSE(job.empty());
  const std::string job_log = absl::StrCat(c.state_dir(), "/jobs/", job, "/job.log");

  // Both ranks are past step 2 (the gate holds them before step 3).
  ASSERT_OK(c.WaitUntil(
      [&]() -> absl::Status {
        std::ifstream in(job_log);
        const std::string text((std::istreambuf_iterator<char>(in)), {});
        return Occurrences(text, " step 2 sum ") == 2
                   ? absl::OkStatus()
                   : absl::UnavailableError(absl::StrCat("job.log so far: ", text));
      },
      absl::Seconds(120)));
  auto before = JobStatusJson(c, job);
  ASSERT_OK(before.status());
  ASSERT_EQ((*before)["state"], "RUNNING") << before->dump();
  const std::map<int, int> pids = RankPids(*before);
  ASSERT_EQ(pids.size(), 2u) << before->dump();

  ASSERT_OK(c.KillHead());  // SIGKILL: nothing is closed or flushed
  std::ofstream(absl::StrCat(gates, "/head-killed")).close();
  // The ranks ran and printed steps 3-5 with no head at all.
  ASSERT_OK(AwaitFile(c, absl::StrCat(gates, "/rank-0-ran-headless")));
  ASSERT_OK(AwaitFile(c, absl::StrCat(gates, "/rank-1-ran-headless")));
  // Unwatched for longer than a node agent's grace for an owned worker (500 ms): a rank that
  // still depended on its watch would be gone by now.
  absl::SleepFor(absl::Seconds(1));
  ASSERT_OK(c.StartHead());
  std::ofstream(absl::StrCat(gates, "/head-back")).close();

  Json after;
  ASSERT_OK(c.WaitUntil(
      [&]() -> absl::Status {
        auto status = JobStatusJson(c, job);
        if (!status.ok()) return status.status();
        after = *status;
        const std::string state = after.value("state", "");
        return state == "SUCCEEDED" || state == "FAILED" || state == "STOPPED"
                   ? absl::OkStatus()
                   : absl::UnavailableError(absl::StrCat("the job is ", state));
      },
      absl::Seconds(120)));
  EXPECT_EQ(after["state"], "SUCCEEDED") << after.dump();
  EXPECT_EQ(after.value("restart_count", -1), 0) << after.dump();
  EXPECT_EQ(RankPids(after), pids) << "the ranks were restarted: " << after.dump();

  // Every step of both ranks is in the log exactly once, printed by the first (and only) pid.
  const CliResult logs = c.Cli({"job", "logs", job});
  ASSERT_EQ(logs.exit_code, 0) << Describe(logs);
  // The controller's own lines ("tessera: ...") come on stderr.
  EXPECT_THAT(logs.err, HasSubstr("the head restarted: watching the 2 ranks"));
  EXPECT_THAT(logs.err, HasSubstr("succeeded: every rank exited with code 0"));
  for (int rank = 0; rank < 2; ++rank) {
    for (int step = 0; step < 9; ++step) {
      const std::string line = absl::StrCat("[rank", rank, "]: rank ", rank, " pid ", pids.at(rank),
                                            " step ", step, " sum ", 2 * (step + 1), "\n");
      EXPECT_EQ(Occurrences(logs.out, line), 1) << line << logs.out;
    }
    EXPECT_THAT(logs.out, HasSubstr(absl::StrCat("[rank", rank, "]: rank ", rank, " done\n")));
  }
  const CliResult listed = c.Cli({"job", "list"});
  EXPECT_EQ(listed.exit_code, 0) << Describe(listed);
  EXPECT_THAT(listed.out, HasSubstr("survivor"));

  // An ended job is a record too: the next head still answers for it.
  ASSERT_OK(c.KillHead());
  ASSERT_OK(c.StartHead());
  auto kept = JobStatusJson(c, job);
  ASSERT_OK(kept.status());
  EXPECT_EQ((*kept)["state"], "SUCCEEDED") << kept->dump();
  EXPECT_EQ(RankPids(*kept), pids) << kept->dump();
  const CliResult kept_logs = c.Cli({"job", "logs", job, "--rank", "1"});
  EXPECT_EQ(kept_logs.exit_code, 0) << Describe(kept_logs);
  EXPECT_THAT(kept_logs.out, HasSubstr("rank 1 done"));
}

}  // namespace
}  // namespace tessera::testing
