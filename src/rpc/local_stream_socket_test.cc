#include "rpc/local_stream_socket.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstddef>
#include <cstring>
#include <string>
#include <thread>

#include "absl/strings/str_cat.h"
#include "tessera/v1/worker.pb.h"

namespace tessera::rpc {
namespace {

using ::testing::HasSubstr;

v1::TaskBatch BatchOf(int tasks, size_t value_bytes) {
  v1::TaskBatch batch;
  for (int i = 0; i < tasks; ++i) {
    v1::TaskSpec* task = batch.add_tasks();
    task->set_task_id("task-" + std::to_string(i));
    task->add_args()->set_value(std::string(value_bytes, static_cast<char>('a' + i % 26)));
  }
  return batch;
}

// A connected pair through a real listener of this process (the peer checks pass: same pid, same
// user).
struct Connected {
  int listener = -1;
  int client = -1;
  int server = -1;
  ~Connected() {
    for (int fd : {listener, client, server}) {
      if (fd >= 0) close(fd);
    }
  }
};

void Connect(Connected& c) {
  auto listening = ListenLocal(4);
  ASSERT_TRUE(listening.ok()) << listening.status();
  EXPECT_FALSE(listening->name.empty());
  c.listener = listening->fd;
  auto client = ConnectLocal(listening->name, getpid());
  ASSERT_TRUE(client.ok()) << client.status();
  c.client = *client;
  auto server = AcceptSameUser(c.listener);
  ASSERT_TRUE(server.ok()) << server.status();
  c.server = *server;
}

TEST(LocalStreamSocketTest, FramesArriveWholeAndInOrderWhateverTheirSize) {
  Connected c;
  ASSERT_NO_FATAL_FAILURE(Connect(c));
  // Small frames written together, then one of 3 MiB (many reads), then small again.
  std::string bytes;
  AppendFrame(BatchOf(1, 10), &bytes);
  AppendFrame(BatchOf(3, 100), &bytes);
  const v1::TaskBatch big = BatchOf(3, 1 << 20);
  std::thread writer([&] {
    EXPECT_TRUE(WriteAll(c.client, bytes));
    std::string more;
    AppendFrame(big, &more);
    AppendFrame(BatchOf(2, 0), &more);
    EXPECT_TRUE(WriteAll(c.client, more));
    shutdown(c.client, SHUT_WR);
  });
  FrameReader reader(c.server);
  v1::TaskBatch got;
  ASSERT_TRUE(reader.Next(&got));
  EXPECT_EQ(got.tasks_size(), 1);
  ASSERT_TRUE(reader.Next(&got));
  EXPECT_EQ(got.tasks_size(), 3);
  EXPECT_EQ(got.tasks(2).args(0).value(), std::string(100, 'c'));
  ASSERT_TRUE(reader.Next(&got));
  EXPECT_EQ(got.SerializeAsString(), big.SerializeAsString());
  ASSERT_TRUE(reader.Next(&got));
  EXPECT_EQ(got.tasks_size(), 2);
  EXPECT_EQ(got.tasks(1).task_id(), "task-1");
  // The writer half-closed at a frame boundary: a clean end, no error.
  EXPECT_FALSE(reader.Next(&got));
  EXPECT_EQ(reader.error(), "");
  writer.join();
}

TEST(LocalStreamSocketTest, ABrokenStreamEndsWithTheReason) {
  struct Case {
    std::string bytes;
    std::string error;
  };
  std::string oversize = "\xff\xff\xff\x7f";  // 2 GiB: over kMaxFrameBytes
  std::string truncated;
  AppendFrame(BatchOf(2, 50), &truncated);
  truncated.resize(truncated.size() - 7);
  // A frame whose bytes are not a TaskBatch (field 1 is a message: a varint does not parse).
  std::string garbage = std::string("\x03\x00\x00\x00", 4) + "\x0a\xff\xff";
  for (const Case& test :
       {Case{oversize, "over the limit"}, Case{truncated, "ended inside a frame"},
        Case{std::string("\x05\x00", 2), "ended inside a frame"},
        Case{garbage, "is not a tessera.v1.TaskBatch"}}) {
    int fds[2];
    ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, fds), 0);
    ASSERT_TRUE(WriteAll(fds[1], test.bytes));
    shutdown(fds[1], SHUT_WR);
    FrameReader reader(fds[0]);
    v1::TaskBatch got;
    EXPECT_FALSE(reader.Next(&got));
    EXPECT_THAT(reader.error(), HasSubstr(test.error));
    EXPECT_FALSE(reader.Next(&got));  // and stays broken
    close(fds[0]);
    close(fds[1]);
  }
}

TEST(LocalStreamSocketTest, AListenerThatIsNotTheExpectedProcessIsRefused) {
  auto listening = ListenLocal(4);
  ASSERT_TRUE(listening.ok()) << listening.status();
  // The name is served by this process, not by the pid the caller was told of (a process that
  // took the name first looks like this).
  auto refused = ConnectLocal(listening->name, getpid() + 1);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kPermissionDenied);
  EXPECT_THAT(refused.status().message(), HasSubstr(absl::StrCat("served by pid ", getpid())));
  auto none = ConnectLocal("no-such-socket-" + std::to_string(getpid()), getpid());
  ASSERT_FALSE(none.ok());
  EXPECT_EQ(none.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(ConnectLocal("", getpid()).status().code(), absl::StatusCode::kInvalidArgument);
  close(listening->fd);
}

TEST(LocalStreamSocketTest, AProcessOfAnotherUserIsNotAccepted) {
  if (geteuid() != 0) {
    GTEST_SKIP() << "needs root to connect as another user (nobody)";
  }
  auto listening = ListenLocal(4);
  ASSERT_TRUE(listening.ok()) << listening.status();
  int connected[2];  // the child says it has connected
  ASSERT_EQ(pipe(connected), 0);
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    // As nobody: connect (ConnectLocal's own check would refuse a root listener, so raw).
    if (setgid(65534) != 0 || setuid(65534) != 0) _exit(2);
    const int fd = socket(AF_UNIX, SOCK_STREAM, 0);
    sockaddr_un address{};
    address.sun_family = AF_UNIX;
    std::memcpy(address.sun_path + 1, listening->name.data(), listening->name.size());
    const auto length =
        static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + 1 + listening->name.size());
    if (connect(fd, reinterpret_cast<sockaddr*>(&address), length) != 0) _exit(3);
    if (write(connected[1], "c", 1) != 1) _exit(4);
    char byte;
    // Refused: the listener closes the connection without writing anything.
    _exit(read(fd, &byte, 1) == 0 ? 0 : 5);
  }
  close(connected[1]);
  char byte;
  ASSERT_EQ(read(connected[0], &byte, 1), 1) << "the child could not connect";
  close(connected[0]);
  // The child's connection waits in the backlog first: accepting closes it, and the same user's
  // connection after it is the one accepted.
  std::thread same_user([&] {
    auto fd = ConnectLocal(listening->name, getpid());
    EXPECT_TRUE(fd.ok()) << fd.status();
    if (fd.ok()) close(*fd);
  });
  int refused = 0;
  auto accepted = AcceptSameUser(listening->fd, &refused);
  same_user.join();
  ASSERT_TRUE(accepted.ok()) << accepted.status();
  EXPECT_EQ(refused, 1);
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0) << "the refused child saw something other than the end";
  close(*accepted);
  close(listening->fd);
}

}  // namespace
}  // namespace tessera::rpc
