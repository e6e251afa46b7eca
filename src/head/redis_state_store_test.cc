// RedisStateStore beyond the StateStore contract (state_store_test.cc runs that against it):
// addresses and password files, the layout in Redis, key prefixes, reconnecting after a Redis
// restart, giving up on a Redis that stays down or hangs, passwords, and concurrent callers; and
// the head server choosing it when given a Redis address.
// Every test runs a real redis-server (redis_test_server.h) and skips where none is installed.
#include "head/redis_state_store.h"

#include <fcntl.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "head/head_server.h"
#include "head/redis_test_server.h"
#include "process/unique_fd.h"

namespace tessera {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

constexpr char kPassword[] = "s3cret-Pa55word-never-shown";

// Skips the test, saying why, when redis-server is not installed.
#define START_REDIS_OR_SKIP(var, ...)                                              \
  auto var##_or = testing::RedisTestServer::Create(__VA_ARGS__);                   \
  if (!var##_or.ok() && var##_or.status().code() == absl::StatusCode::kNotFound) { \
    GTEST_SKIP() << "no Redis to test against: " << var##_or.status().message();   \
  }                                                                                \
  ASSERT_TRUE(var##_or.ok()) << var##_or.status();                                 \
  std::unique_ptr<testing::RedisTestServer> var = *std::move(var##_or)

std::string Message(const absl::Status& status) { return std::string(status.message()); }

// Writes `content` to `path` with `mode`.
void WriteFile(const std::string& path, const std::string& content, mode_t mode) {
  {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out << content;
  }
  ASSERT_EQ(::chmod(path.c_str(), mode), 0);
}

// A clock whose first sleep runs `on_first_sleep` (then sleeps for real): a test can make
// something happen exactly while a call is between two reconnection attempts.
class HookedClock : public Clock {
 public:
  explicit HookedClock(std::function<void()> on_first_sleep)
      : on_first_sleep_(std::move(on_first_sleep)) {}
  absl::Time Now() const override { return fake_.Now(); }
  void SleepFor(absl::Duration duration) override {
    if (on_first_sleep_) std::exchange(on_first_sleep_, nullptr)();
    fake_.SleepFor(duration);
  }
  bool AwaitWithDeadline(absl::Mutex& mu, const absl::Condition& condition, absl::Time deadline)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) override {
    return fake_.AwaitWithDeadline(mu, condition, deadline);
  }
  int sleep_count() const { return fake_.sleep_count(); }

 private:
  std::function<void()> on_first_sleep_;
  FakeClock fake_;
};

// A loopback TCP port nothing listens on (bound, then closed).
int ClosedLoopbackPort() {
  UniqueFd fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::bind(fd.get(), reinterpret_cast<sockaddr*>(&address), sizeof(address)) != 0) return 0;
  socklen_t length = sizeof(address);
  ::getsockname(fd.get(), reinterpret_cast<sockaddr*>(&address), &length);
  return ntohs(address.sin_port);
}

TEST(ParseRedisAddressTest, AcceptsHostPortIpv6AndUnixSockets) {
  auto tcp = ParseRedisAddress("redis.internal:6379");
  ASSERT_TRUE(tcp.ok()) << tcp.status();
  EXPECT_EQ(tcp->kind, RedisAddress::Kind::kTcp);
  EXPECT_EQ(tcp->host, "redis.internal");
  EXPECT_EQ(tcp->port, 6379);

  auto v6 = ParseRedisAddress("[::1]:7000");
  ASSERT_TRUE(v6.ok()) << v6.status();
  EXPECT_EQ(v6->host, "::1");
  EXPECT_EQ(v6->port, 7000);

  auto unix_socket = ParseRedisAddress("unix:/run/redis/redis.sock");
  ASSERT_TRUE(unix_socket.ok()) << unix_socket.status();
  EXPECT_EQ(unix_socket->kind, RedisAddress::Kind::kUnix);
  EXPECT_EQ(unix_socket->path, "/run/redis/redis.sock");
  EXPECT_EQ(unix_socket->text, "unix:/run/redis/redis.sock");
}

TEST(ParseRedisAddressTest, RefusesMalformedAddressesNamingTheProblem) {
  const std::pair<std::string, std::string> cases[] = {
      {"", "empty"},
      {"redis://localhost:6379", "not a URL"},
      {"localhost", "no port"},
      {":6379", "no host"},
      {"localhost:0", "1 to 65535"},
      {"localhost:65536", "1 to 65535"},
      {"localhost:63x", "1 to 65535"},
      {"::1:6379", "[ADDRESS]:PORT"},
      {"[::1]6379", "[ADDRESS]:PORT"},
      {"unix:relative.sock", "absolute path"},
      {"unix:", "absolute path"},
      {"unix:/" + std::string(200, 'x'), "longer than"},
  };
  for (const auto& [address, problem] : cases) {
    auto parsed = ParseRedisAddress(address);
    ASSERT_FALSE(parsed.ok()) << address;
    EXPECT_EQ(parsed.status().code(), absl::StatusCode::kInvalidArgument) << address;
    EXPECT_THAT(Message(parsed.status()), HasSubstr(problem)) << address;
    EXPECT_THAT(Message(parsed.status()), Not(HasSubstr("\n")));
  }
}

class RedisPasswordFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char pattern[] = "/tmp/tessera-redis-password-XXXXXX";
    ASSERT_NE(::mkdtemp(pattern), nullptr);
    dir_ = pattern;
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string dir_;
};

TEST_F(RedisPasswordFileTest, ReadsThePasswordWithoutItsFinalNewline) {
  const std::string path = dir_ + "/password";
  WriteFile(path, std::string(kPassword) + "\n", 0600);
  auto password = ReadRedisPasswordFile(path);
  ASSERT_TRUE(password.ok()) << password.status();
  EXPECT_EQ(*password, kPassword);
}

TEST_F(RedisPasswordFileTest, RefusesAFileOthersCanReadWithoutShowingItsContent) {
  const std::string path = dir_ + "/password";
  WriteFile(path, kPassword, 0640);
  auto password = ReadRedisPasswordFile(path);
  ASSERT_FALSE(password.ok());
  EXPECT_EQ(password.status().code(), absl::StatusCode::kPermissionDenied);
  EXPECT_THAT(Message(password.status()), HasSubstr("chmod 600"));
  EXPECT_THAT(Message(password.status()), HasSubstr(path));
  EXPECT_THAT(Message(password.status()), Not(HasSubstr(kPassword)));
}

TEST_F(RedisPasswordFileTest, RefusesEmptyMultiLineAndMissingFiles) {
  WriteFile(dir_ + "/empty", "\n", 0600);
  EXPECT_THAT(Message(ReadRedisPasswordFile(dir_ + "/empty").status()), HasSubstr("is empty"));
  WriteFile(dir_ + "/two-lines", std::string(kPassword) + "\nmore\n", 0600);
  auto two = ReadRedisPasswordFile(dir_ + "/two-lines");
  EXPECT_THAT(Message(two.status()), HasSubstr("on one line"));
  EXPECT_THAT(Message(two.status()), Not(HasSubstr(kPassword)));
  auto missing = ReadRedisPasswordFile(dir_ + "/missing");
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(Message(missing.status()), HasSubstr(dir_ + "/missing"));
}

TEST(RedisStateStoreTest, EachTableIsOneHashUnderTheKeyPrefix) {
  START_REDIS_OR_SKIP(redis);
  RedisStateStoreOptions options;
  options.address = redis->address();
  auto store = RedisStateStore::Create(options);
  ASSERT_TRUE(store.ok()) << store.status();
  ASSERT_TRUE((*store)->Put("kv", "a", "1").ok());
  ASSERT_TRUE((*store)->Put("nodes", "n1", "spec").ok());
  EXPECT_EQ(*redis->Command({"HGET", "tessera:kv", "a"}), "1");
  EXPECT_EQ(*redis->Command({"HGET", "tessera:nodes", "n1"}), "spec");
  EXPECT_EQ(*redis->Command({"TYPE", "tessera:kv"}), "hash");
}

TEST(RedisStateStoreTest, KeyPrefixesIsolateTwoStoresOnOneServer) {
  START_REDIS_OR_SKIP(redis);
  RedisStateStoreOptions first;
  first.address = redis->address();
  first.key_prefix = "cluster-a:";
  RedisStateStoreOptions second = first;
  second.key_prefix = "cluster-b:";
  auto a = RedisStateStore::Create(first);
  auto b = RedisStateStore::Create(second);
  ASSERT_TRUE(a.ok()) << a.status();
  ASSERT_TRUE(b.ok()) << b.status();
  ASSERT_TRUE((*a)->Put("kv", "shared-key", "from a").ok());
  ASSERT_TRUE((*b)->Put("kv", "shared-key", "from b").ok());
  ASSERT_TRUE((*a)->Put("kv", "only-a", "x").ok());
  EXPECT_EQ(**(*a)->Get("kv", "shared-key"), "from a");
  EXPECT_EQ(**(*b)->Get("kv", "shared-key"), "from b");
  EXPECT_FALSE((*b)->Get("kv", "only-a")->has_value());
  EXPECT_EQ((*a)->List("kv")->size(), 2u);
  EXPECT_EQ((*b)->List("kv")->size(), 1u);
  EXPECT_TRUE(*(*b)->Delete("kv", "shared-key"));
  EXPECT_EQ(**(*a)->Get("kv", "shared-key"), "from a");
}

TEST(RedisStateStoreTest, AKeyOfAnotherTypeUnderThePrefixIsAClearError) {
  START_REDIS_OR_SKIP(redis);
  ASSERT_TRUE(redis->Command({"SET", "tessera:kv", "not a hash"}).ok());
  RedisStateStoreOptions options;
  options.address = redis->address();
  auto store = RedisStateStore::Create(options);
  ASSERT_TRUE(store.ok()) << store.status();
  absl::Status put = (*store)->Put("kv", "a", "1");
  EXPECT_EQ(put.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(Message(put), HasSubstr("HSET tessera:kv"));
  EXPECT_THAT(Message(put), HasSubstr("WRONGTYPE"));
  EXPECT_THAT(Message(put), HasSubstr(redis->address()));
}

TEST(RedisStateStoreTest, TheNextCallAfterARedisRestartSucceeds) {
  START_REDIS_OR_SKIP(redis);
  RedisStateStoreOptions options;
  options.address = redis->address();
  auto store = RedisStateStore::Create(options);
  ASSERT_TRUE(store.ok()) << store.status();
  ASSERT_TRUE((*store)->Put("kv", "before", "1").ok());

  // The store's connection now leads to a server that is gone.
  ASSERT_TRUE(redis->Stop().ok());
  ASSERT_TRUE(redis->Start().ok());

  absl::Status put = (*store)->Put("kv", "after", "2");
  ASSERT_TRUE(put.ok()) << put;
  EXPECT_EQ(**(*store)->Get("kv", "after"), "2");
  EXPECT_EQ(*redis->Command({"HGET", "tessera:kv", "after"}), "2");
}

TEST(RedisStateStoreTest, ACallMadeWhileRedisIsDownSucceedsWhenItIsBackWithinTheBudget) {
  START_REDIS_OR_SKIP(redis);
  testing::RedisTestServer* server = redis.get();
  // Redis comes back while the call waits between two attempts.
  HookedClock clock([server] { ASSERT_TRUE(server->Start().ok()); });
  RedisStateStoreOptions options;
  options.address = redis->address();
  options.clock = &clock;
  auto store = RedisStateStore::Create(options);
  ASSERT_TRUE(store.ok()) << store.status();
  ASSERT_TRUE(redis->Stop().ok());

  absl::Status put = (*store)->Put("kv", "a", "1");
  ASSERT_TRUE(put.ok()) << put;
  EXPECT_GE(clock.sleep_count(), 1);
  EXPECT_EQ(*redis->Command({"HGET", "tessera:kv", "a"}), "1");
}

TEST(RedisStateStoreTest, ARedisThatStaysDownFailsTheCallAfterTheBudgetThenAtOnce) {
  START_REDIS_OR_SKIP(redis);
  FakeClock clock;
  RedisStateStoreOptions options;
  options.address = redis->address();
  options.reconnect_budget = absl::Seconds(5);
  options.clock = &clock;
  auto store = RedisStateStore::Create(options);
  ASSERT_TRUE(store.ok()) << store.status();
  ASSERT_TRUE(redis->Stop().ok());

  absl::Status put = (*store)->Put("kv", "a", "1");
  EXPECT_EQ(put.code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(Message(put), HasSubstr("redis at " + redis->address()));
  EXPECT_THAT(Message(put), HasSubstr("HSET tessera:kv"));
  EXPECT_THAT(Message(put), HasSubstr("gave up after 5s"));
  EXPECT_THAT(Message(put), Not(HasSubstr("\n")));
  // It kept trying for the whole budget, with growing waits rather than a busy loop.
  EXPECT_EQ(clock.total_slept(), absl::Seconds(5));
  EXPECT_LT(clock.sleep_count(), 30);

  // While Redis stays down, later calls make one attempt and fail without waiting.
  const int sleeps = clock.sleep_count();
  auto get = (*store)->Get("kv", "a");
  EXPECT_EQ(get.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(Message(get.status()), HasSubstr("HGET tessera:kv"));
  EXPECT_EQ(clock.sleep_count(), sleeps);

  // Once it answers again, so does the store, with its full budget restored.
  ASSERT_TRUE(redis->Start().ok());
  EXPECT_TRUE((*store)->Put("kv", "a", "1").ok());
  EXPECT_EQ(**(*store)->Get("kv", "a"), "1");
}

TEST(RedisStateStoreTest, AHungRedisTimesOutInsteadOfBlockingForever) {
  START_REDIS_OR_SKIP(redis);
  FakeClock clock;
  RedisStateStoreOptions options;
  options.address = redis->address();
  options.command_timeout = absl::Milliseconds(100);
  options.reconnect_budget = absl::Seconds(1);
  options.clock = &clock;
  auto store = RedisStateStore::Create(options);
  ASSERT_TRUE(store.ok()) << store.status();
  ASSERT_TRUE(redis->Pause().ok());

  auto get = (*store)->Get("kv", "a");
  ASSERT_TRUE(redis->Resume().ok());
  EXPECT_EQ(get.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(Message(get.status()), HasSubstr("HGET tessera:kv"));
  EXPECT_THAT(Message(get.status()), HasSubstr(redis->address()));
  EXPECT_THAT(Message(get.status()), HasSubstr("no reply within 100ms"));
  // Resumed, it answers the next call.
  EXPECT_TRUE((*store)->Put("kv", "a", "1").ok());
}

TEST(RedisStateStoreTest, AnUnreachableRedisIsAOneLineUnavailableErrorNamingTheAddress) {
  char pattern[] = "/tmp/tessera-redis-none-XXXXXX";
  ASSERT_NE(::mkdtemp(pattern), nullptr);
  const std::string dir = pattern;
  const int port = ClosedLoopbackPort();
  ASSERT_NE(port, 0);
  for (const std::string& address :
       {"unix:" + dir + "/no-such.sock", absl::StrCat("127.0.0.1:", port)}) {
    RedisStateStoreOptions options;
    options.address = address;
    auto store = RedisStateStore::Create(options);
    ASSERT_FALSE(store.ok()) << address;
    EXPECT_EQ(store.status().code(), absl::StatusCode::kUnavailable) << store.status();
    EXPECT_THAT(Message(store.status()), HasSubstr("redis at " + address + ": cannot connect"));
    EXPECT_THAT(Message(store.status()), Not(HasSubstr("\n")));
  }
  std::filesystem::remove_all(dir);
}

TEST(RedisStateStoreTest, APasswordProtectedRedisNeedsThePasswordFileAndNeverShowsIt) {
  START_REDIS_OR_SKIP(redis, testing::RedisTestServerOptions{.password = kPassword});
  const std::string right = redis->dir() + "/right.password";
  const std::string wrong = redis->dir() + "/wrong.password";
  WriteFile(right, std::string(kPassword) + "\n", 0600);
  WriteFile(wrong, "not-the-password\n", 0600);
  std::vector<std::string> messages;

  RedisStateStoreOptions options;
  options.address = redis->address();
  auto without = RedisStateStore::Create(options);
  ASSERT_FALSE(without.ok());
  EXPECT_EQ(without.status().code(), absl::StatusCode::kUnauthenticated);
  EXPECT_THAT(Message(without.status()), HasSubstr("needs a password"));
  EXPECT_THAT(Message(without.status()), HasSubstr("PING"));
  EXPECT_THAT(Message(without.status()), HasSubstr(redis->address()));
  messages.push_back(Message(without.status()));

  options.password_file = wrong;
  auto refused = RedisStateStore::Create(options);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kUnauthenticated);
  EXPECT_THAT(Message(refused.status()), HasSubstr("refused the password in " + wrong));
  EXPECT_THAT(Message(refused.status()), Not(HasSubstr("not-the-password")));
  messages.push_back(Message(refused.status()));

  FakeClock clock;
  options.password_file = right;
  options.clock = &clock;
  auto store = RedisStateStore::Create(options);
  ASSERT_TRUE(store.ok()) << store.status();
  ASSERT_TRUE((*store)->Put("kv", "a", "1").ok());
  // A restarted server is authenticated to again.
  ASSERT_TRUE(redis->Stop().ok());
  ASSERT_TRUE(redis->Start().ok());
  EXPECT_TRUE((*store)->Put("kv", "b", "2").ok());
  EXPECT_EQ(**(*store)->Get("kv", "b"), "2");
  // And the errors of a server that went away hold no password either.
  ASSERT_TRUE(redis->Stop().ok());
  messages.push_back(Message((*store)->Put("kv", "c", "3")));
  messages.push_back(Message((*store)->List("kv").status()));

  for (const std::string& message : messages) {
    EXPECT_FALSE(message.empty());
    EXPECT_THAT(message, Not(HasSubstr(kPassword)));
    EXPECT_THAT(message, Not(HasSubstr("\n")));
  }
}

TEST(RedisStateStoreTest, APasswordFileForAServerWithoutPasswordIsRefused) {
  START_REDIS_OR_SKIP(redis);
  const std::string path = redis->dir() + "/password";
  WriteFile(path, kPassword, 0600);
  RedisStateStoreOptions options;
  options.address = redis->address();
  options.password_file = path;
  auto store = RedisStateStore::Create(options);
  ASSERT_FALSE(store.ok());
  EXPECT_EQ(store.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(Message(store.status()), HasSubstr("has no password set"));
  EXPECT_THAT(Message(store.status()), Not(HasSubstr(kPassword)));
}

TEST(RedisStateStoreTest, ConcurrentCallersEachGetTheirOwnResults) {
  START_REDIS_OR_SKIP(redis);
  RedisStateStoreOptions options;
  options.address = redis->address();
  auto created = RedisStateStore::Create(options);
  ASSERT_TRUE(created.ok()) << created.status();
  RedisStateStore& store = **created;
  constexpr int kThreads = 4;
  constexpr int kEach = 200;
  std::vector<std::thread> threads;
  std::vector<int> mismatches(kThreads, 0);
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&store, &mismatches, t] {
      for (int i = 0; i < kEach; ++i) {
        const std::string key = absl::StrCat(t, "/", i);
        const std::string value = absl::StrCat("value ", t, " ", i);
        if (!store.Put("kv", key, value).ok()) ++mismatches[t];
        auto got = store.Get("kv", key);
        if (!got.ok() || !got->has_value() || **got != value) ++mismatches[t];
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  for (int t = 0; t < kThreads; ++t) EXPECT_EQ(mismatches[t], 0) << "thread " << t;
  auto listed = store.List("kv");
  ASSERT_TRUE(listed.ok());
  EXPECT_EQ(listed->size(), static_cast<size_t>(kThreads * kEach));
}

TEST(HeadServerStoreTest, ARedisAddressPutsTheHeadsTablesInRedis) {
  START_REDIS_OR_SKIP(redis);
  HeadOptions options;
  options.state_dir = redis->dir() + "/state";
  options.redis_address = redis->address();
  options.redis_key_prefix = "cluster-x:";
  auto head = HeadServer::Create(options);
  ASSERT_TRUE(head.ok()) << head.status();
  ASSERT_NE(dynamic_cast<RedisStateStore*>((*head)->store()), nullptr);
  ASSERT_TRUE((*head)->store()->Put("kv", "k", "v").ok());
  EXPECT_EQ(*redis->Command({"HGET", "cluster-x:kv", "k"}), "v");
}

TEST(HeadServerStoreTest, WithoutARedisAddressTheTablesAreInMemory) {
  char pattern[] = "/tmp/tessera-head-store-XXXXXX";
  ASSERT_NE(::mkdtemp(pattern), nullptr);
  HeadOptions options;
  options.state_dir = std::string(pattern) + "/state";
  {
    auto head = HeadServer::Create(options);
    ASSERT_TRUE(head.ok()) << head.status();
    EXPECT_NE(dynamic_cast<InMemoryStateStore*>((*head)->store()), nullptr);
  }
  std::filesystem::remove_all(pattern);
}

TEST(HeadServerStoreTest, AnUnreachableRedisFailsTheHeadsStartBeforeItServes) {
  START_REDIS_OR_SKIP(redis);
  ASSERT_TRUE(redis->Stop().ok());
  HeadOptions options;
  options.state_dir = redis->dir() + "/state";
  options.redis_address = redis->address();
  auto head = HeadServer::Create(options);
  ASSERT_FALSE(head.ok());
  EXPECT_EQ(head.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(Message(head.status()), HasSubstr("redis at " + redis->address()));
  EXPECT_FALSE(std::filesystem::exists(options.state_dir + "/head.address"));
}

}  // namespace
}  // namespace tessera
