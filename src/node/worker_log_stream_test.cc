// StreamWorkerLogs over real files: following until the exit, a snapshot without follow, one
// stream only, and a client that leaves or is stopped while the worker still runs.
#include "node/worker_log_stream.h"

#include <stdlib.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>

#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "gtest/gtest.h"

namespace tessera {
namespace {

class WorkerLogStreamTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string pattern = (std::filesystem::temp_directory_path() / "tessera-logs-XXXXXX").string();
    ASSERT_NE(::mkdtemp(pattern.data()), nullptr);
    dir_ = pattern;
    files_ = {dir_ + "/w.out", dir_ + "/w.err"};
  }
  void TearDown() override {
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }
  void Append(const std::string& path, const std::string& data) {
    std::ofstream(path, std::ios::app) << data << std::flush;
  }
  // Records what is sent, per stream. Thread-safe.
  WorkerLogStreamHooks Recording(std::function<bool(absl::Duration)> await_exit) {
    WorkerLogStreamHooks hooks;
    hooks.send = [this](bool is_stderr, std::string data) {
      absl::MutexLock lock(&mu_);
      (is_stderr ? err_ : out_) += data;
      ++sends_;
      return sends_ <= max_sends_;
    };
    hooks.await_exit = std::move(await_exit);
    hooks.should_stop = [this] { return stop_.load(); };
    return hooks;
  }

  std::string dir_;
  WorkerLogFiles files_;
  absl::Mutex mu_;
  std::string out_, err_;
  int sends_ = 0;
  int max_sends_ = 1 << 30;
  std::atomic<bool> stop_{false};
};

TEST_F(WorkerLogStreamTest, FollowsBothFilesUntilTheWorkerExitsAndSendsEveryByte) {
  absl::Notification exited;
  std::thread worker([&] {
    for (int i = 0; i < 50; ++i) {
      Append(files_.stdout_path, "o" + std::to_string(i) + "\n");
      if (i % 5 == 0) Append(files_.stderr_path, "e" + std::to_string(i) + "\n");
    }
    exited.Notify();
  });
  absl::Status status = StreamWorkerLogs(files_, {}, Recording([&](absl::Duration timeout) {
                                           return exited.WaitForNotificationWithTimeout(timeout);
                                         }));
  worker.join();
  ASSERT_TRUE(status.ok()) << status;
  std::string want_out, want_err;
  for (int i = 0; i < 50; ++i) {
    want_out += "o" + std::to_string(i) + "\n";
    if (i % 5 == 0) want_err += "e" + std::to_string(i) + "\n";
  }
  absl::MutexLock lock(&mu_);
  EXPECT_EQ(out_, want_out);
  EXPECT_EQ(err_, want_err);
}

TEST_F(WorkerLogStreamTest, WithoutFollowSendsWhatIsThereAndDoesNotWaitForTheExit) {
  Append(files_.stdout_path, "so far");
  WorkerLogStreamOptions options;
  options.follow = false;
  options.want_stderr = false;
  Append(files_.stderr_path, "not wanted");
  absl::Status status = StreamWorkerLogs(files_, options, Recording([](absl::Duration) {
                                           ADD_FAILURE() << "waited for the exit";
                                           return true;
                                         }));
  ASSERT_TRUE(status.ok()) << status;
  absl::MutexLock lock(&mu_);
  EXPECT_EQ(out_, "so far");
  EXPECT_EQ(err_, "");
}

TEST_F(WorkerLogStreamTest, FilesThatNeverAppearEndWithTheExit) {
  std::atomic<int> waits{0};
  absl::Status status =
      StreamWorkerLogs(files_, {}, Recording([&](absl::Duration) { return ++waits >= 2; }));
  ASSERT_TRUE(status.ok()) << status;
  absl::MutexLock lock(&mu_);
  EXPECT_EQ(sends_, 0);
}

TEST_F(WorkerLogStreamTest, AClientThatLeavesEndsTheStreamWhileTheWorkerRuns) {
  max_sends_ = 0;  // the first send finds the client gone
  Append(files_.stdout_path, "x");
  WorkerLogStreamOptions options;
  options.check_interval = absl::Milliseconds(20);
  absl::Status status = StreamWorkerLogs(files_, options, Recording([](absl::Duration timeout) {
                                           absl::SleepFor(timeout);
                                           return false;  // never exits
                                         }));
  EXPECT_TRUE(absl::IsCancelled(status)) << status;
}

TEST_F(WorkerLogStreamTest, ShouldStopEndsAFollowThatHasNothingToSend) {
  WorkerLogStreamOptions options;
  options.check_interval = absl::Milliseconds(20);
  std::atomic<int> waits{0};
  absl::Status status = StreamWorkerLogs(files_, options, Recording([&](absl::Duration timeout) {
                                           if (++waits == 3) stop_.store(true);
                                           absl::SleepFor(timeout);
                                           return false;
                                         }));
  EXPECT_TRUE(absl::IsCancelled(status)) << status;
}

}  // namespace
}  // namespace tessera
