// The agent's store and the head's word on dead drivers: objects a driver owned go when a
// heartbeat response names it gone, though that driver never connected to this node's store;
// and the store spills into the node's private spill folder.
#include <sys/stat.h>

#include <string>

#include "gtest/gtest.h"
#include "node/agent_server.h"
#include "node/fake_head.h"
#include "objects/object_store_server.h"

namespace tessera {
namespace {

using node_testing::Eventually;

class AgentStoreOwnersTest : public node_testing::AgentWithHeadTest {
 protected:
  void StartAgent(uint64_t store_bytes) {
    StartHead();
    AgentOptions options = AgentOptionsFor("cpu-only.yaml");
    options.environment = Environment({{"PATH", "/usr/bin:/bin"}, {"LANG", "C"}});
    options.prestarted_workers = 0;
    options.object_store_bytes = store_bytes;
    auto agent = NodeAgentServer::Create(options);
    ASSERT_TRUE(agent.ok()) << agent.status();
    agent_ = std::move(*agent);
    ASSERT_NE(agent_->object_store(), nullptr);
  }
  ObjectId PutOwned(const std::string& owner, uint64_t size) {
    ObjectStore& store = agent_->object_store()->store();
    const ObjectId id = ObjectId::FromRandom();
    EXPECT_TRUE(store.Create(kLocalStoreClient, id, size, "", {.owner = owner}).ok());
    EXPECT_TRUE(store.Seal(kLocalStoreClient, id).ok());
    return id;
  }
};

TEST_F(AgentStoreOwnersTest, ObjectsOfADriverTheHeadNamesGoneAreFreed) {
  StartAgent(8 << 20);
  const ObjectId gone = PutOwned("driver-gone", 1 << 20);
  const ObjectId alive = PutOwned("driver-alive", 1 << 20);
  ObjectStore& store = agent_->object_store()->store();
  {
    absl::MutexLock lock(&head_.mu);
    head_.gone_drivers = {"driver-gone"};
  }
  ASSERT_TRUE(Eventually([&] { return !store.Contains(gone); }));
  EXPECT_TRUE(store.Contains(alive));
  // A late result for the gone driver is refused rather than left behind.
  EXPECT_EQ(
      store.Create(kLocalStoreClient, ObjectId::FromRandom(), 10, "", {.owner = "driver-gone"})
          .status()
          .code(),
      absl::StatusCode::kFailedPrecondition);
}

TEST_F(AgentStoreOwnersTest, TheStoreSpillsIntoThePrivateSpillFolderOfItsNode) {
  StartAgent(4 << 20);
  const std::string spill = state_dir_ + "/nodes/n1/spill";
  struct stat st {};
  ASSERT_EQ(stat(spill.c_str(), &st), 0);
  EXPECT_TRUE(S_ISDIR(st.st_mode));
  EXPECT_EQ(st.st_mode & 0777, 0700u);
  const ObjectId first = PutOwned("driver-a", 3 << 20);
  PutOwned("driver-a", 3 << 20);  // does not fit beside `first`: `first` is spilled
  ASSERT_EQ(stat((spill + "/" + first.Hex()).c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  EXPECT_EQ(agent_->object_store()->store().Stats().num_spilled, 1u);
}

}  // namespace
}  // namespace tessera
