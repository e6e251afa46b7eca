#include "process/log_reader.h"

#include <fcntl.h>
#include <unistd.h>

#include <thread>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "process/process_supervisor.h"
#include "process/test_support.h"

namespace tessera {
namespace {

using ::tessera::testing::HelperPath;
using ::tessera::testing::TempDir;
using ::tessera::testing::WriteText;

void Append(const std::string& path, const std::string& text) {
  int fd = ::open(path.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::write(fd, text.data(), text.size()), static_cast<ssize_t>(text.size()));
  ::close(fd);
}

// Everything the follower yields until its end.
std::string Drain(LogFollower& follower) {
  std::string all;
  while (true) {
    auto next = follower.Next();
    EXPECT_TRUE(next.ok()) << next.status();
    if (!next.ok() || !next->has_value()) return all;
    all += (*next)->data;
  }
}

TEST(ReadLogTest, ReadsABoundedPieceFromAnOffset) {
  TempDir dir;
  std::string path = dir / "w.out";
  WriteText(path, "0123456789");
  auto piece = ReadLog(path, 3, 4);
  ASSERT_TRUE(piece.ok()) << piece.status();
  EXPECT_EQ(piece->offset, 3);
  EXPECT_EQ(piece->data, "3456");
  EXPECT_EQ(piece->end(), 7);
  EXPECT_EQ(ReadLog(path, 8, 100)->data, "89");
  EXPECT_EQ(ReadLog(path, 10, 100)->data, "");
  EXPECT_EQ(ReadLog(path, 50, 100)->data, "");
}

TEST(ReadLogTest, BadRequestsAreErrors) {
  TempDir dir;
  EXPECT_EQ(ReadLog(dir / "missing", 0, 10).status().code(), absl::StatusCode::kNotFound);
  WriteText(dir / "w.out", "x");
  EXPECT_EQ(ReadLog(dir / "w.out", -1, 10).status().message(),
            "log offset must not be negative, got -1");
  EXPECT_EQ(ReadLog(dir / "w.out", 0, 0).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(LogFollowerTest, ReturnsWhatIsThereInChunksThenEndsAfterTheWriterExited) {
  TempDir dir;
  std::string path = dir / "w.out";
  WriteText(path, std::string(100, 'x'));
  LogFollowOptions options;
  options.chunk_bytes = 30;
  auto follower = LogFollower::Create(path, options);
  ASSERT_TRUE(follower.ok()) << follower.status();
  EXPECT_TRUE((*follower)->uses_inotify());
  std::vector<int64_t> offsets;
  for (int i = 0; i < 4; ++i) {
    auto next = (*follower)->Next();
    ASSERT_TRUE(next.ok() && next->has_value());
    offsets.push_back((*next)->offset);
  }
  EXPECT_THAT(offsets, ::testing::ElementsAre(0, 30, 60, 90));
  (*follower)->WriterExited();
  auto end = (*follower)->Next();
  ASSERT_TRUE(end.ok());
  EXPECT_FALSE(end->has_value());
}

TEST(LogFollowerTest, SeesAppendedDataAndReadsEverythingWrittenBeforeTheExit) {
  TempDir dir;
  std::string path = dir / "w.out";
  WriteText(path, "");
  auto follower = LogFollower::Create(path);
  ASSERT_TRUE(follower.ok()) << follower.status();
  Append(path, "first\n");
  auto first = (*follower)->Next();
  ASSERT_TRUE(first.ok() && first->has_value());
  EXPECT_EQ((*first)->data, "first\n");
  // A writer appends while the follower is blocked waiting, then exits.
  std::thread writer([&] {
    Append(path, "second\n");
    Append(path, "third\n");
    (*follower)->WriterExited();
  });
  EXPECT_EQ(Drain(**follower), "second\nthird\n");
  writer.join();
  EXPECT_EQ((*follower)->offset(), 19);
}

TEST(LogFollowerTest, PollingSeesAppendedDataToo) {
  TempDir dir;
  std::string path = dir / "w.out";
  LogFollowOptions options;
  options.wait = LogFollowOptions::Wait::kPolling;
  options.recheck_interval = absl::Milliseconds(20);
  auto follower = LogFollower::Create(path, options);
  ASSERT_TRUE(follower.ok()) << follower.status();
  EXPECT_FALSE((*follower)->uses_inotify());
  std::thread writer([&] {
    Append(path, "polled\n");
    (*follower)->WriterExited();
  });
  EXPECT_EQ(Drain(**follower), "polled\n");
  writer.join();
}

TEST(LogFollowerTest, StopEndsABlockedFollow) {
  TempDir dir;
  std::string path = dir / "w.out";
  WriteText(path, "");
  auto follower = LogFollower::Create(path);
  ASSERT_TRUE(follower.ok()) << follower.status();
  std::thread stopper([&] { (*follower)->Stop(); });
  auto next = (*follower)->Next();
  stopper.join();
  ASSERT_TRUE(next.ok());
  EXPECT_FALSE(next->has_value());
}

TEST(LogFollowerTest, NextWithinGivesAnEmptySegmentWhenNothingCame) {
  TempDir dir;
  std::string path = dir / "w.out";
  WriteText(path, "abc");
  auto follower = LogFollower::Create(path);
  ASSERT_TRUE(follower.ok()) << follower.status();
  EXPECT_EQ((*(*follower)->NextWithin(absl::ZeroDuration()))->data, "abc");
  auto idle = (*follower)->NextWithin(absl::Milliseconds(1));
  ASSERT_TRUE(idle.ok() && idle->has_value());
  EXPECT_EQ((*idle)->data, "");
  EXPECT_EQ((*idle)->offset, 3);
}

TEST(LogFollowerTest, WaitsForAFileThatDoesNotExistYet) {
  TempDir dir;
  std::string path = dir / "later.out";
  auto follower = LogFollower::Create(path);
  ASSERT_TRUE(follower.ok()) << follower.status();
  std::thread writer([&] { Append(path, "appeared\n"); });
  auto next = (*follower)->Next();
  writer.join();
  ASSERT_TRUE(next.ok() && next->has_value()) << next.status();
  EXPECT_EQ((*next)->data, "appeared\n");
}

TEST(LogFollowerTest, ANegativeOffsetStartsThatFarBeforeTheEnd) {
  TempDir dir;
  std::string path = dir / "w.out";
  WriteText(path, "line1\nline2\n");
  LogFollowOptions options;
  options.offset = -6;
  auto follower = LogFollower::Create(path, options);
  ASSERT_TRUE(follower.ok()) << follower.status();
  (*follower)->WriterExited();
  EXPECT_EQ(Drain(**follower), "line2\n");
}

TEST(LogFollowerTest, ATruncatedFileIsReadAgainFromItsStart) {
  TempDir dir;
  std::string path = dir / "w.out";
  WriteText(path, "long old content\n");
  auto follower = LogFollower::Create(path);
  ASSERT_TRUE(follower.ok()) << follower.status();
  EXPECT_EQ((*(*follower)->Next())->data, "long old content\n");
  WriteText(path, "new\n");
  (*follower)->WriterExited();
  EXPECT_EQ(Drain(**follower), "new\n");
}

// The node agent's use: follow a worker's log while it runs; its exit callback ends the stream.
TEST(LogFollowerTest, FollowsARealWorkerUntilItExits) {
  TempDir dir;
  auto supervisor = ProcessSupervisor::Create();
  ASSERT_TRUE(supervisor.ok()) << supervisor.status();
  ChildSpec spec;
  std::string go = dir / "go";
  spec.argv = {HelperPath(), "out", "before", "wait-file", go, "out", "after", "exit", "0"};
  spec.stdout_path = dir / "workers/w1.out";
  spec.stderr_path = dir / "workers/w1.err";
  auto follower = LogFollower::Create(spec.stdout_path);
  ASSERT_TRUE(follower.ok()) << follower.status();
  LogFollower* raw = follower->get();
  ASSERT_TRUE((*supervisor)
                  ->Start(ChildId("w1"), spec,
                          [raw](const ChildId&, const ExitStatus&) { raw->WriterExited(); })
                  .ok());
  auto first = raw->Next();
  ASSERT_TRUE(first.ok() && first->has_value());
  EXPECT_EQ((*first)->data, "before\n");
  WriteText(go, "");
  EXPECT_EQ(Drain(*raw), "after\n");
  (*supervisor)->Shutdown(absl::Seconds(5));
}

TEST(LogFollowerTest, RefusesBadOptions) {
  LogFollowOptions options;
  options.chunk_bytes = 0;
  EXPECT_EQ(LogFollower::Create("/tmp/x", options).status().code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace tessera
