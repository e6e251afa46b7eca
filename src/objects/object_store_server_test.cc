// The store through its socket, with real separate client processes (object_store_test_helper).
#include "objects/object_store_server.h"

#include <spawn.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "objects/object_store_client.h"
#include "objects/other_user_probe.h"
#include "objects/store_protocol.h"

extern char** environ;

namespace tessera {
namespace {

using ::testing::HasSubstr;

constexpr uint64_t kMiB = 1 << 20;

// Waits for `done` with a generous deadline (the machine may be loaded); never slow when it holds.
bool Eventually(const std::function<bool()>& done) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (!done()) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return true;
}

class Helper {
 public:
  // Starts the helper with `args`; its stdout is readable with ReadLine.
  explicit Helper(const std::vector<std::string>& args) {
    int fds[2];
    EXPECT_EQ(pipe(fds), 0);
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_adddup2(&actions, fds[1], 1);
    posix_spawn_file_actions_addclose(&actions, fds[0]);
    std::vector<std::string> all = {OBJECT_STORE_TEST_HELPER};
    all.insert(all.end(), args.begin(), args.end());
    std::vector<char*> argv;
    for (std::string& a : all) argv.push_back(a.data());
    argv.push_back(nullptr);
    EXPECT_EQ(posix_spawn(&pid_, argv[0], &actions, nullptr, argv.data(), environ), 0);
    posix_spawn_file_actions_destroy(&actions);
    close(fds[1]);
    out_ = fds[0];
  }
  ~Helper() {
    if (pid_ > 0) {
      kill(pid_, SIGKILL);
      Wait();
    }
    close(out_);
  }
  std::string ReadLine() {
    std::string line;
    char c;
    while (read(out_, &c, 1) == 1 && c != '\n') line.push_back(c);
    return line;
  }
  // The raw wait status.
  int Wait() {
    int status = 0;
    waitpid(pid_, &status, 0);
    pid_ = -1;
    return status;
  }

 private:
  pid_t pid_ = -1;
  int out_ = -1;
};

int RunHelper(const std::vector<std::string>& args) {
  Helper h(args);
  const int status = h.Wait();
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

class ObjectStoreServerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char dir_template[] = "/tmp/tessera-objects-XXXXXX";
    ASSERT_NE(mkdtemp(dir_template), nullptr);
    dir_ = dir_template;
    socket_ = dir_ + "/objects.sock";
  }
  void TearDown() override {
    server_.reset();
    std::system(("rm -rf " + dir_).c_str());
  }
  void StartServer(uint64_t capacity, std::string spill_dir = "") {
    auto server = ObjectStoreServer::Start(
        {.socket_path = socket_, .capacity_bytes = capacity, .spill_dir = std::move(spill_dir)});
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = *std::move(server);
  }
  std::unique_ptr<ObjectStoreClient> Connect() {
    auto client = ObjectStoreClient::Connect({.socket_path = socket_});
    EXPECT_TRUE(client.ok()) << client.status();
    return client.ok() ? *std::move(client) : nullptr;
  }

  std::string dir_;
  std::string socket_;
  std::unique_ptr<ObjectStoreServer> server_;
};

TEST_F(ObjectStoreServerTest, SocketIs0600WhateverTheUmask) {
  const mode_t saved = umask(0);
  StartServer(1 << 20);
  umask(saved);
  struct stat st {};
  ASSERT_EQ(lstat(socket_.c_str(), &st), 0);
  EXPECT_TRUE(S_ISSOCK(st.st_mode));
  EXPECT_EQ(st.st_mode & 0777, 0600u);
}

// Every client maps the store's memory: another user is turned away by its credentials even
// when the socket file itself is open to everyone.
TEST_F(ObjectStoreServerTest, AnotherUserIsRefusedByItsCredentials) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root to connect as another user";
  StartServer(1 << 20);
  ASSERT_EQ(chmod(dir_.c_str(), 0777), 0);
  ASSERT_EQ(chmod(socket_.c_str(), 0777), 0);
  EXPECT_EQ(testing::ConnectAsOtherUser(socket_, 65534),
            testing::OtherUserOutcome::kClosedWithoutAWord);
  EXPECT_EQ(server_->refused_connection_count(), 1);
  // This user still connects.
  EXPECT_NE(Connect(), nullptr);
}

TEST_F(ObjectStoreServerTest, PutInOneProcessGetInAnother) {
  StartServer(16 * kMiB);
  const ObjectId id = ObjectId::FromRandom();
  ASSERT_EQ(RunHelper({"put", socket_, id.Hex(), std::to_string(3 * kMiB), "7"}), 0);
  EXPECT_EQ(RunHelper({"check", socket_, id.Hex(), std::to_string(3 * kMiB), "7"}), 0);
  EXPECT_NE(RunHelper({"check", socket_, id.Hex(), std::to_string(3 * kMiB), "8"}), 0);

  auto client = Connect();
  auto buf = client->Get(id);
  ASSERT_TRUE(buf.ok()) << buf.status();
  EXPECT_EQ(buf->size(), 3 * kMiB);
  EXPECT_EQ(buf->metadata(), "helper");
  EXPECT_EQ(buf->data()[0], 7);
  EXPECT_EQ(server_->store().Stats().pinned_bytes, 3 * kMiB);
}

TEST_F(ObjectStoreServerTest, GetIsAViewOfTheStoreMemoryNotACopy) {
  StartServer(4 * kMiB);
  auto client = Connect();
  const ObjectId id = ObjectId::FromRandom();
  ASSERT_TRUE(client->Put(id, "hello", "", {}).ok());
  auto a = client->Get(id);
  auto b = client->Get(id);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(a->data(), b->data());
  // A byte changed in the server's own mapping shows through the client's view.
  auto loc = server_->store().Get(kLocalStoreClient, id);
  ASSERT_TRUE(loc.ok());
  server_->arena().base()[loc->offset] = 'J';
  EXPECT_EQ(a->view(), "Jello");
  ASSERT_TRUE(server_->store().Release(kLocalStoreClient, id).ok());
}

TEST_F(ObjectStoreServerTest, BuffersPinUntilReleasedAndOutliveTheClient) {
  StartServer(4 * kMiB);
  const ObjectId id = ObjectId::FromRandom();
  std::optional<ObjectBuffer> buf;
  {
    auto client = Connect();
    ASSERT_TRUE(client->Put(id, "abc", "m", {}).ok());
    auto got = client->Get(id);
    ASSERT_TRUE(got.ok());
    buf.emplace(*std::move(got));
    ASSERT_TRUE(client->Delete(id).ok());  // deferred: still pinned
  }
  EXPECT_EQ(buf->view(), "abc");
  EXPECT_GT(server_->store().Stats().allocated_bytes, 0u);
  ASSERT_TRUE(buf->Release().ok());
  EXPECT_EQ(server_->store().Stats().allocated_bytes, 0u);
}

TEST_F(ObjectStoreServerTest, AClientThatDiesHoldingAPinReleasesIt) {
  StartServer(4 * kMiB);
  auto client = Connect();
  const ObjectId id = ObjectId::FromRandom();
  ASSERT_TRUE(client->Put(id, std::string(1000, 'x'), "", {}).ok());
  Helper helper({"pin-and-die", socket_, id.Hex()});
  ASSERT_EQ(helper.ReadLine(), "pinned");
  const int status = helper.Wait();
  ASSERT_TRUE(WIFSIGNALED(status));
  ASSERT_TRUE(client->Delete(id).ok());
  EXPECT_TRUE(Eventually([&] { return server_->store().Stats().allocated_bytes == 0; }));
}

TEST_F(ObjectStoreServerTest, AnObjectLeftUnsealedByADeadClientIsAborted) {
  StartServer(4 * kMiB);
  const ObjectId id = ObjectId::FromRandom();
  Helper helper({"create-and-die", socket_, id.Hex(), std::to_string(kMiB)});
  ASSERT_EQ(helper.ReadLine(), "created");
  helper.Wait();
  EXPECT_TRUE(Eventually([&] { return server_->store().Stats().num_objects == 0; }));
  EXPECT_EQ(server_->store().Stats().allocated_bytes, 0u);
  auto client = Connect();
  EXPECT_TRUE(client->Put(id, "again", "", {}).ok());  // the id is free again
}

TEST_F(ObjectStoreServerTest, CapacityAndEvictionThroughTheSocket) {
  StartServer(4 * kMiB);
  auto client = Connect();
  auto too_big = client->Create(ObjectId::FromRandom(), 5 * kMiB, "", {});
  EXPECT_EQ(too_big.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(too_big.status().message(), HasSubstr("can never fit"));

  const ObjectId primary = ObjectId::FromRandom();
  const ObjectId copy = ObjectId::FromRandom();
  ASSERT_TRUE(client->Put(primary, std::string(2 * kMiB, 'p'), "", {}).ok());
  ASSERT_TRUE(client->Put(copy, std::string(kMiB, 'c'), "", {.evictable = true}).ok());
  const ObjectId next = ObjectId::FromRandom();
  ASSERT_TRUE(client->Put(next, std::string(1536 * 1024, 'n'), "", {}).ok());  // evicts `copy`
  EXPECT_FALSE(*client->Contains(copy));
  EXPECT_TRUE(*client->Contains(primary));
  auto stats = client->Stats();
  ASSERT_TRUE(stats.ok());
  EXPECT_EQ(stats->evictions, 1u);
  auto full = client->Put(ObjectId::FromRandom(), std::string(kMiB, 'f'), "", {});
  EXPECT_EQ(full.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(full.message(), HasSubstr("object store full"));
}

// Raw socket access, to send what no well-behaved client would.
class RawConnection {
 public:
  explicit RawConnection(const std::string& path) {
    fd_ = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::memcpy(addr.sun_path, path.data(), path.size());
    EXPECT_EQ(connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  }
  ~RawConnection() { Close(); }
  void Close() {
    if (fd_ >= 0) close(fd_);
    fd_ = -1;
  }
  void Send(const std::string& bytes) {
    ASSERT_EQ(write(fd_, bytes.data(), bytes.size()), static_cast<ssize_t>(bytes.size()));
  }
  // The next reply, or nullopt at end of stream.
  std::optional<StoreReply> Read() {
    std::string header = ReadN(4);
    if (header.size() < 4) return std::nullopt;
    auto n = ParseFrameHeader(header);
    if (!n.ok()) return std::nullopt;
    auto reply = ParseStoreReply(ReadN(*n));
    if (!reply.ok()) return std::nullopt;
    return *reply;
  }

 private:
  std::string ReadN(size_t n) {
    std::string out;
    char buf[4096];
    while (out.size() < n) {
      const ssize_t got = read(fd_, buf, std::min(sizeof(buf), n - out.size()));
      if (got <= 0) break;
      out.append(buf, got);
    }
    return out;
  }
  int fd_;
};

TEST_F(ObjectStoreServerTest, GetWaitsForTheSealOfAnotherProcess) {
  StartServer(16 * kMiB);
  const ObjectId id = ObjectId::FromRandom();
  auto reader = Connect();
  absl::StatusOr<ObjectBuffer> got = absl::UnknownError("not yet");
  std::thread waiter([&] { got = reader->Get(id, {.wait_ms = 60'000}); });
  ASSERT_TRUE(Eventually([&] { return server_->waiting_get_count() == 1; }));
  ASSERT_EQ(RunHelper({"put", socket_, id.Hex(), std::to_string(kMiB), "5"}), 0);
  waiter.join();
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(got->size(), kMiB);
  EXPECT_EQ(got->data()[kMiB - 1], 5);
  EXPECT_EQ(server_->waiting_get_count(), 0);
  // The connection is in step afterwards.
  EXPECT_TRUE(*reader->Contains(id));
}

TEST_F(ObjectStoreServerTest, GetWokenByASealOfTheHostingProcess) {
  StartServer(kMiB);
  const ObjectId id = ObjectId::FromRandom();
  auto reader = Connect();
  absl::StatusOr<ObjectBuffer> got = absl::UnknownError("not yet");
  std::thread waiter([&] { got = reader->Get(id, {.wait_ms = 60'000}); });
  ASSERT_TRUE(Eventually([&] { return server_->waiting_get_count() == 1; }));
  auto loc = server_->store().Create(kLocalStoreClient, id, 3, "", {});
  ASSERT_TRUE(loc.ok());
  std::memcpy(server_->arena().base() + loc->offset, "abc", 3);
  ASSERT_TRUE(server_->store().Seal(kLocalStoreClient, id).ok());
  waiter.join();
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(got->view(), "abc");
}

TEST_F(ObjectStoreServerTest, AWaitingGetEndsAtItsDeadlineOrWithItsClient) {
  StartServer(kMiB);
  auto reader = Connect();
  auto missing = reader->Get(ObjectId::FromRandom(), {.wait_ms = 20});
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_THAT(missing.status().message(), HasSubstr("not sealed in time"));
  EXPECT_EQ(server_->waiting_get_count(), 0);
  EXPECT_TRUE(reader->Stats().ok());  // still in step

  // A client that dies while waiting leaves nothing behind.
  RawConnection raw(socket_);
  const ObjectId id = ObjectId::FromRandom();
  raw.Send(
      Frame(EncodeStoreRequest({.type = StoreMessageType::kGet, .id = id, .wait_ms = 60'000})));
  ASSERT_TRUE(Eventually([&] { return server_->waiting_get_count() == 1; }));
  raw.Close();
  ASSERT_TRUE(Eventually([&] { return server_->waiting_get_count() == 0; }));
  EXPECT_TRUE(reader->Put(id, "x", "", {}).ok());
  EXPECT_EQ(server_->store().Stats().pinned_bytes, 0u);
}

TEST_F(ObjectStoreServerTest, MalformedMessagesGetAnErrorAndNeverDisturbTheStore) {
  StartServer(4 * kMiB);
  auto client = Connect();
  const ObjectId id = ObjectId::FromRandom();
  ASSERT_TRUE(client->Put(id, "kept", "", {}).ok());

  RawConnection raw(socket_);
  raw.Send(Frame("\x02\x05short"));  // a Get whose id is cut off
  auto reply = raw.Read();
  ASSERT_TRUE(reply.has_value());
  EXPECT_EQ(reply->status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(reply->status.message(), HasSubstr("truncated"));
  raw.Send(Frame(std::string("\x09\x05", 2)));  // a future protocol version
  reply = raw.Read();
  ASSERT_TRUE(reply.has_value());
  EXPECT_THAT(reply->status.message(), HasSubstr("version 9"));
  // Still in step: a well-formed request on the same connection works.
  raw.Send(Frame(EncodeStoreRequest({.type = StoreMessageType::kContains, .id = id})));
  reply = raw.Read();
  ASSERT_TRUE(reply.has_value());
  EXPECT_TRUE(reply->status.ok());
  EXPECT_TRUE(reply->contains);
  // A length that cannot be trusted: one error, then the connection is closed.
  raw.Send(std::string("\xff\xff\xff\xff", 4) + "garbage");
  reply = raw.Read();
  ASSERT_TRUE(reply.has_value());
  EXPECT_THAT(reply->status.message(), HasSubstr("outside 2.."));
  EXPECT_FALSE(raw.Read().has_value());

  auto buf = client->Get(id);
  ASSERT_TRUE(buf.ok());
  EXPECT_EQ(buf->view(), "kept");
}

TEST_F(ObjectStoreServerTest, OneStorePerSocketAndStopCleansUp) {
  StartServer(kMiB);
  auto second = ObjectStoreServer::Start({.socket_path = socket_, .capacity_bytes = kMiB});
  EXPECT_EQ(second.status().code(), absl::StatusCode::kAlreadyExists);
  auto client = Connect();
  ASSERT_TRUE(client->Put(ObjectId::FromRandom(), "x", "", {}).ok());
  server_->Stop();
  EXPECT_NE(access(socket_.c_str(), F_OK), 0);
  auto after = client->Put(ObjectId::FromRandom(), "x", "", {});
  EXPECT_EQ(after.code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(ObjectStoreClient::Connect({.socket_path = socket_}).status().code(),
            absl::StatusCode::kUnavailable);
  // A stale socket file (its server died without cleaning up) is replaced.
  const int fd = socket(AF_UNIX, SOCK_STREAM, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::memcpy(addr.sun_path, socket_.data(), socket_.size());
  ASSERT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  close(fd);
  auto again = ObjectStoreServer::Start({.socket_path = socket_, .capacity_bytes = kMiB});
  EXPECT_TRUE(again.ok()) << again.status();
}

TEST_F(ObjectStoreServerTest, ManyConcurrentClients) {
  StartServer(64 * kMiB);
  std::vector<std::thread> threads;
  std::atomic<int> failures{0};
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&, t] {
      auto client = ObjectStoreClient::Connect({.socket_path = socket_});
      if (!client.ok()) {
        failures++;
        return;
      }
      for (int i = 0; i < 50; ++i) {
        const ObjectId id = ObjectId::FromRandom();
        const std::string value = std::to_string(t * 1000 + i);
        if (!(*client)->Put(id, value, "", {}).ok()) failures++;
        auto buf = (*client)->Get(id);
        if (!buf.ok() || buf->view() != value) failures++;
        buf = absl::InternalError("drop");  // releases the pin
        if (!(*client)->Delete(id).ok()) failures++;
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(failures.load(), 0);
  EXPECT_EQ(server_->store().Stats().allocated_bytes, 0u);
}

// A driver killed with -9 holding objects: its connection closes and everything it owned goes,
// including what another process (a worker) wrote for it.
TEST_F(ObjectStoreServerTest, OwnerConnectionClosingFreesItsObjects) {
  StartServer(4 * kMiB);
  const ObjectId own = ObjectId::FromRandom();
  const ObjectId result = ObjectId::FromRandom();
  auto reader = Connect();
  {
    Helper driver({"own-and-wait", socket_, own.Hex(), std::to_string(kMiB), "driver-abc"});
    ASSERT_EQ(driver.ReadLine(), "stored");
    auto worker = Connect();
    ASSERT_TRUE(worker->Put(result, std::string(kMiB, 'r'), "", {.owner = "driver-abc"}).ok());
    worker.reset();  // the worker exits first: the result stays for its owner
    ASSERT_TRUE(Eventually([&] { return server_->connection_count() == 2; }));
    EXPECT_TRUE(*reader->Contains(result));
    EXPECT_TRUE(*reader->Contains(own));
  }  // SIGKILL
  ASSERT_TRUE(Eventually([&] { return server_->connection_count() == 1; }));
  EXPECT_FALSE(*reader->Contains(own));
  EXPECT_FALSE(*reader->Contains(result));
  EXPECT_EQ(reader->Stats()->allocated_bytes, 0u);
  // A late result for the dead owner is refused rather than leaked.
  auto late = reader->Create(ObjectId::FromRandom(), 10, "", {.owner = "driver-abc"});
  EXPECT_EQ(late.status().code(), absl::StatusCode::kFailedPrecondition);
}

TEST_F(ObjectStoreServerTest, PrimariesSpillToAPrivateFolderAndReadBackIntact) {
  const std::string spill = dir_ + "/spill";
  ASSERT_EQ(mkdir(spill.c_str(), 0755), 0);
  ASSERT_EQ(std::system(("touch " + spill + "/stale").c_str()), 0);
  StartServer(4 * kMiB, spill);
  struct stat st {};
  ASSERT_EQ(stat(spill.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0700u);
  EXPECT_NE(stat((spill + "/stale").c_str(), &st), 0);  // an earlier store's files are gone

  std::vector<ObjectId> ids;
  for (int i = 0; i < 4; ++i) {
    ids.push_back(ObjectId::FromRandom());
    ASSERT_EQ(RunHelper({"put", socket_, ids.back().Hex(), std::to_string(3 * kMiB / 2),
                         std::to_string(10 + i)}),
              0);
  }
  auto client = Connect();
  EXPECT_GE(client->Stats()->num_spilled, 2u);
  ASSERT_EQ(stat((spill + "/" + ids[0].Hex()).c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ(RunHelper({"check", socket_, ids[i].Hex(), std::to_string(3 * kMiB / 2),
                         std::to_string(10 + i)}),
              0)
        << i;
  }
  EXPECT_GE(client->Stats()->restores, 2u);
  for (const ObjectId& id : ids) ASSERT_TRUE(client->Delete(id).ok());
  EXPECT_EQ(client->Stats()->num_spilled, 0u);
  size_t left = 0;
  for ([[maybe_unused]] const auto& f : std::filesystem::directory_iterator(spill)) ++left;
  EXPECT_EQ(left, 0u);
}

}  // namespace
}  // namespace tessera
