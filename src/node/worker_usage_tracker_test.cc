// WorkerUsageTracker: CPU cores are the rate of CPU seconds between a worker's readings (none on
// its first), memory is summed, workers that stop being read are forgotten.
#include "node/worker_usage_tracker.h"

#include "gtest/gtest.h"

namespace tessera {
namespace {

const absl::Time kStart = absl::FromUnixSeconds(1'700'000'000);

WorkerUsageReading Reading(std::string worker, std::optional<double> cpu,
                           std::optional<uint64_t> memory, std::string job = "") {
  return WorkerUsageReading{WorkerId(std::move(worker)), std::move(job), cpu, memory};
}

TEST(WorkerUsageTrackerTest, AFirstReadingHasMemoryButNoCpuRate) {
  WorkerUsageTracker tracker;
  NodeWorkerUsage usage =
      tracker.Update(kStart, {Reading("w-1", 10.0, 1000, "job-a"), Reading("w-2", 5.0, 24)});
  ASSERT_EQ(usage.workers.size(), 2u);
  EXPECT_EQ(usage.workers[0].worker.value(), "w-1");
  EXPECT_EQ(usage.workers[0].job_id, "job-a");
  EXPECT_EQ(usage.workers[0].cpu_seconds, 10.0);
  EXPECT_FALSE(usage.workers[0].cpu_cores.has_value());
  EXPECT_EQ(usage.cpu_cores, 0);
  EXPECT_EQ(usage.memory_bytes, 1024u);
}

TEST(WorkerUsageTrackerTest, CpuCoresAreTheRateBetweenTwoReadingsSummedOverWorkers) {
  WorkerUsageTracker tracker;
  tracker.Update(kStart, {Reading("w-1", 10.0, 0), Reading("w-2", 5.0, 0)});
  // w-1 spent 3 s of CPU in 2 s (1.5 cores), w-2 1 s (0.5 cores); w-3 is new (no rate yet).
  NodeWorkerUsage usage =
      tracker.Update(kStart + absl::Seconds(2),
                     {Reading("w-1", 13.0, 0), Reading("w-2", 6.0, 0), Reading("w-3", 99.0, 0)});
  ASSERT_EQ(usage.workers.size(), 3u);
  EXPECT_DOUBLE_EQ(*usage.workers[0].cpu_cores, 1.5);
  EXPECT_DOUBLE_EQ(*usage.workers[1].cpu_cores, 0.5);
  EXPECT_FALSE(usage.workers[2].cpu_cores.has_value());
  EXPECT_DOUBLE_EQ(usage.cpu_cores, 2.0);
}

TEST(WorkerUsageTrackerTest, AWorkerNotReadIsForgottenAndStartsOverWhenSeenAgain) {
  WorkerUsageTracker tracker;
  tracker.Update(kStart, {Reading("w-1", 10.0, 0)});
  EXPECT_TRUE(tracker.Update(kStart + absl::Seconds(1), {}).workers.empty());
  NodeWorkerUsage usage = tracker.Update(kStart + absl::Seconds(2), {Reading("w-1", 20.0, 0)});
  EXPECT_FALSE(usage.workers[0].cpu_cores.has_value());
  EXPECT_EQ(usage.cpu_cores, 0);
}

TEST(WorkerUsageTrackerTest, FiguresThatCouldNotBeReadAddNothing) {
  WorkerUsageTracker tracker;
  tracker.Update(kStart, {Reading("w-1", 10.0, 100), Reading("w-2", 1.0, std::nullopt)});
  NodeWorkerUsage usage =
      tracker.Update(kStart + absl::Seconds(1),
                     {Reading("w-1", std::nullopt, 100), Reading("w-2", 2.0, std::nullopt)});
  EXPECT_FALSE(usage.workers[0].cpu_cores.has_value());
  EXPECT_FALSE(usage.workers[1].memory_bytes.has_value());
  EXPECT_DOUBLE_EQ(usage.cpu_cores, 1.0);
  EXPECT_EQ(usage.memory_bytes, 100u);
}

TEST(WorkerUsageTrackerTest, CpuSecondsThatWentDownCountAsNoTimeSpent) {
  WorkerUsageTracker tracker;
  tracker.Update(kStart, {Reading("w-1", 10.0, 0)});
  NodeWorkerUsage usage = tracker.Update(kStart + absl::Seconds(1), {Reading("w-1", 8.0, 0)});
  EXPECT_EQ(usage.workers[0].cpu_cores, 0.0);
  EXPECT_EQ(usage.cpu_cores, 0);
}

}  // namespace
}  // namespace tessera
