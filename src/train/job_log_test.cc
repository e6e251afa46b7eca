#include "train/job_log.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <system_error>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"

namespace tessera::train {
namespace {

namespace fs = std::filesystem;

std::string ReadWholeFile(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

mode_t PermissionsOf(const fs::path& path) {
  struct stat st {};
  EXPECT_EQ(::lstat(path.c_str(), &st), 0) << path;
  return st.st_mode & 07777;
}

class JobLogTest : public ::testing::Test {
 protected:
  void SetUp() override {
    base_ = fs::temp_directory_path() / absl::StrCat("tessera_job_log_test_", ::getpid());
    fs::remove_all(base_);
    fs::create_directories(base_);
    dir_ = base_ / "job-1";
  }
  void TearDown() override {
    std::error_code ignored;
    fs::remove_all(base_, ignored);
  }

  std::unique_ptr<JobLog> NewLog() {
    absl::StatusOr<std::unique_ptr<JobLog>> log = JobLog::Create(dir_.string());
    EXPECT_TRUE(log.ok()) << log.status();
    return log.ok() ? *std::move(log) : nullptr;
  }

  std::string JobLogText() const { return ReadWholeFile(dir_ / "job.log"); }
  std::string RankLogText(int rank) const {
    return ReadWholeFile(dir_ / absl::StrCat("rank-", rank, ".log"));
  }

  fs::path base_;
  fs::path dir_;
};

TEST_F(JobLogTest, RankLinesArePrefixedInJobLogAndPlainInTheRankLog) {
  std::unique_ptr<JobLog> log = NewLog();
  ASSERT_NE(log, nullptr);
  log->RankOutput(0, false, "hello\nworld\n");
  log->RankOutput(1, true, "oops\n");

  EXPECT_EQ(JobLogText(), "[rank0]: hello\n[rank0]: world\n[rank1]: oops\n");
  EXPECT_EQ(RankLogText(0), "hello\nworld\n");
  EXPECT_EQ(RankLogText(1), "oops\n");
  EXPECT_EQ(log->size(), JobLogText().size());
}

TEST_F(JobLogTest, APartialLineWaitsForItsNewline) {
  std::unique_ptr<JobLog> log = NewLog();
  ASSERT_NE(log, nullptr);
  log->RankOutput(2, false, "par");
  EXPECT_EQ(log->size(), 0u);
  EXPECT_EQ(JobLogText(), "");

  log->RankOutput(2, false, "tial\nnext");
  EXPECT_EQ(JobLogText(), "[rank2]: partial\n");
}

TEST_F(JobLogTest, EndRankWritesTheLeftOverPartialLine) {
  std::unique_ptr<JobLog> log = NewLog();
  ASSERT_NE(log, nullptr);
  log->RankOutput(2, false, "done\nno newline");
  log->EndRank(2);

  EXPECT_EQ(JobLogText(), "[rank2]: done\n[rank2]: no newline\n");
  EXPECT_EQ(RankLogText(2), "done\nno newline\n");
  log->EndRank(2);  // nothing left: writes nothing more
  EXPECT_EQ(JobLogText(), "[rank2]: done\n[rank2]: no newline\n");
}

TEST_F(JobLogTest, PartialLinesOfStdoutAndStderrAreKeptApart) {
  std::unique_ptr<JobLog> log = NewLog();
  ASSERT_NE(log, nullptr);
  log->RankOutput(0, false, "out-");
  log->RankOutput(0, true, "err-");
  log->RankOutput(0, false, "line\n");
  log->RankOutput(0, true, "line\n");

  EXPECT_EQ(JobLogText(), "[rank0]: out-line\n[rank0]: err-line\n");
}

TEST_F(JobLogTest, AResumedRankSkipsTheOutputItsLogAlreadyHolds) {
  {
    std::unique_ptr<JobLog> log = NewLog();
    ASSERT_NE(log, nullptr);
    log->BeginRank(0);
    log->RankOutput(0, false, "step 1\nstep 2\nhal");
    log->RankOutput(0, true, "warn\n");
  }  // the head goes: the partial line "hal" was never logged
  std::unique_ptr<JobLog> log = NewLog();
  ASSERT_NE(log, nullptr);
  log->ResumeRank(0);
  // A new watch replays the worker's output from its first byte, in other chunks.
  log->RankOutput(0, false, "step 1\nst");
  log->RankOutput(0, true, "warn\nerr 2\n");
  log->RankOutput(0, false, "ep 2\nhalf\nstep 3\n");

  EXPECT_EQ(JobLogText(),
            "[rank0]: step 1\n[rank0]: step 2\n[rank0]: warn\n[rank0]: err 2\n[rank0]: half\n"
            "[rank0]: step 3\n");
  EXPECT_EQ(RankLogText(0), "step 1\nstep 2\nwarn\nerr 2\nhalf\nstep 3\n");
}

TEST_F(JobLogTest, ANewWorkerOfARankIsCountedFromItsFirstByte) {
  {
    std::unique_ptr<JobLog> log = NewLog();
    ASSERT_NE(log, nullptr);
    log->RankOutput(1, false, "attempt 1\n");
    log->EndRank(1);
    log->BeginRank(1);  // the next attempt's worker
    log->RankOutput(1, false, "attempt 2\n");
  }
  std::unique_ptr<JobLog> log = NewLog();
  ASSERT_NE(log, nullptr);
  log->ResumeRank(1);
  log->RankOutput(1, false, "attempt 2\nmore\n");

  EXPECT_EQ(JobLogText(), "[rank1]: attempt 1\n[rank1]: attempt 2\n[rank1]: more\n");
}

TEST_F(JobLogTest, NoteWritesATesseraLineAsStderr) {
  std::unique_ptr<JobLog> log = NewLog();
  ASSERT_NE(log, nullptr);
  log->Note("attempt 1: 2 ranks running");

  EXPECT_EQ(JobLogText(), "tessera: attempt 1: 2 ranks running\n");
  std::vector<LogChunk> chunks = log->Read(0, 1 << 20);
  ASSERT_EQ(chunks.size(), 1u);
  EXPECT_EQ(chunks[0].data, "tessera: attempt 1: 2 ranks running\n");
  EXPECT_TRUE(chunks[0].is_stderr);
}

TEST_F(JobLogTest, ReadSplitsChunksWhereTheStreamChanges) {
  std::unique_ptr<JobLog> log = NewLog();
  ASSERT_NE(log, nullptr);
  log->Note("hi");                   // stderr, 12 bytes
  log->RankOutput(0, false, "a\n");  // stdout, 11 bytes
  log->RankOutput(0, true, "b\n");   // stderr
  log->RankOutput(1, true, "c\n");   // stderr again: the same chunk

  std::vector<LogChunk> chunks = log->Read(0, 1 << 20);
  ASSERT_EQ(chunks.size(), 3u);
  EXPECT_EQ(chunks[0].data, "tessera: hi\n");
  EXPECT_TRUE(chunks[0].is_stderr);
  EXPECT_EQ(chunks[1].data, "[rank0]: a\n");
  EXPECT_FALSE(chunks[1].is_stderr);
  EXPECT_EQ(chunks[2].data, "[rank0]: b\n[rank1]: c\n");
  EXPECT_TRUE(chunks[2].is_stderr);
}

TEST_F(JobLogTest, ReadStartsAtTheOffsetAndStopsAtMaxBytes) {
  std::unique_ptr<JobLog> log = NewLog();
  ASSERT_NE(log, nullptr);
  log->Note("hi");                   // [0, 12) stderr
  log->RankOutput(0, false, "a\n");  // [12, 23) stdout

  std::vector<LogChunk> chunks = log->Read(5, 10);
  ASSERT_EQ(chunks.size(), 2u);
  EXPECT_EQ(chunks[0].data, "ra: hi\n");
  EXPECT_TRUE(chunks[0].is_stderr);
  EXPECT_EQ(chunks[1].data, "[ra");
  EXPECT_FALSE(chunks[1].is_stderr);

  std::vector<LogChunk> from_boundary = log->Read(12, 1 << 20);
  ASSERT_EQ(from_boundary.size(), 1u);
  EXPECT_EQ(from_boundary[0].data, "[rank0]: a\n");
  EXPECT_FALSE(from_boundary[0].is_stderr);

  EXPECT_TRUE(log->Read(log->size(), 1 << 20).empty());
  EXPECT_TRUE(log->Read(log->size() + 100, 1 << 20).empty());
}

TEST_F(JobLogTest, ReopeningALogContinuesAtItsEndAndReadsOldBytesAsStdout) {
  {
    std::unique_ptr<JobLog> log = NewLog();
    ASSERT_NE(log, nullptr);
    log->Note("first head");
  }
  std::unique_ptr<JobLog> log = NewLog();
  ASSERT_NE(log, nullptr);
  EXPECT_EQ(log->size(), std::string("tessera: first head\n").size());
  log->Note("second head");

  std::vector<LogChunk> chunks = log->Read(0, 1 << 20);
  ASSERT_EQ(chunks.size(), 2u);
  EXPECT_EQ(chunks[0].data, "tessera: first head\n");
  EXPECT_FALSE(chunks[0].is_stderr);
  EXPECT_EQ(chunks[1].data, "tessera: second head\n");
  EXPECT_TRUE(chunks[1].is_stderr);
}

TEST_F(JobLogTest, AwaitGrowthReturnsTrueWhenAnotherThreadAppends) {
  std::unique_ptr<JobLog> log = NewLog();
  ASSERT_NE(log, nullptr);
  const uint64_t offset = log->size();
  std::thread writer([&] { log->RankOutput(0, false, "step 1\n"); });
  EXPECT_TRUE(log->AwaitGrowth(offset, absl::Now() + absl::Seconds(5)));
  writer.join();
  EXPECT_GT(log->size(), offset);
}

TEST_F(JobLogTest, AwaitGrowthReturnsFalseAtTheDeadline) {
  std::unique_ptr<JobLog> log = NewLog();
  ASSERT_NE(log, nullptr);
  log->Note("already there");
  const absl::Time start = absl::Now();
  EXPECT_FALSE(log->AwaitGrowth(log->size(), start + absl::Milliseconds(30)));
  const absl::Duration waited = absl::Now() - start;
  EXPECT_GE(waited, absl::Milliseconds(25));
  EXPECT_LT(waited, absl::Seconds(2));
  // Data before the offset counts at once.
  EXPECT_TRUE(log->AwaitGrowth(0, absl::Now() + absl::Seconds(5)));
}

TEST_F(JobLogTest, CloseWakesAWaitingReaderAndStopsWrites) {
  std::unique_ptr<JobLog> log = NewLog();
  ASSERT_NE(log, nullptr);
  const absl::Time start = absl::Now();
  std::thread closer([&] { log->Close(); });
  EXPECT_FALSE(log->AwaitGrowth(0, start + absl::Seconds(10)));
  closer.join();
  EXPECT_LT(absl::Now() - start, absl::Seconds(5));
  EXPECT_TRUE(log->closed());

  log->RankOutput(0, false, "late\n");
  log->Note("late");
  EXPECT_EQ(log->size(), 0u);
}

TEST_F(JobLogTest, FilesArePrivateToTheUser) {
  std::unique_ptr<JobLog> log = NewLog();
  ASSERT_NE(log, nullptr);
  log->RankOutput(3, false, "x\n");

  EXPECT_EQ(PermissionsOf(dir_), 0700u);
  EXPECT_EQ(PermissionsOf(dir_ / "job.log"), 0600u);
  EXPECT_EQ(PermissionsOf(dir_ / "rank-3.log"), 0600u);
}

TEST_F(JobLogTest, ALoosenedFolderIsMadePrivateAgain) {
  fs::create_directories(dir_);
  ::chmod(dir_.c_str(), 0755);
  std::unique_ptr<JobLog> log = NewLog();
  ASSERT_NE(log, nullptr);
  EXPECT_EQ(PermissionsOf(dir_), 0700u);
}

TEST_F(JobLogTest, CreateRefusesAFolderThatIsASymlink) {
  const fs::path real = base_ / "elsewhere";
  fs::create_directories(real);
  fs::create_directory_symlink(real, dir_);

  absl::StatusOr<std::unique_ptr<JobLog>> log = JobLog::Create(dir_.string());
  ASSERT_FALSE(log.ok());
  EXPECT_EQ(log.status().code(), absl::StatusCode::kPermissionDenied);
  EXPECT_THAT(log.status().message(), ::testing::HasSubstr(dir_.string()));
  EXPECT_FALSE(fs::exists(real / "job.log"));
}

}  // namespace
}  // namespace tessera::train
