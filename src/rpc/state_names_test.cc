#include "rpc/state_names.h"

#include <functional>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "gtest/gtest.h"

namespace tessera::rpc {
namespace {

// One protocol enum and its word function, taking the raw number.
struct Family {
  const google::protobuf::EnumDescriptor* type;
  std::function<std::string_view(int)> word;
  bool lower_case;  // the statuses are shown in lower case, the states in upper case
};

std::vector<Family> Families() {
  return {
      {v1::NodeState_descriptor(), [](int n) { return NodeStateName(v1::NodeState(n)); }, false},
      {v1::PlacementGroupState_descriptor(),
       [](int n) { return PlacementGroupStateName(v1::PlacementGroupState(n)); }, false},
      {v1::SliceGroupState_descriptor(),
       [](int n) { return SliceGroupStateName(v1::SliceGroupState(n)); }, false},
      {v1::JobState_descriptor(), [](int n) { return JobStateName(v1::JobState(n)); }, false},
      {v1::DemandStatus_descriptor(), [](int n) { return DemandStatusName(v1::DemandStatus(n)); },
       true},
      {v1::PickStatus_descriptor(), [](int n) { return PickStatusName(v1::PickStatus(n)); }, true},
      {v1::GangJobState_descriptor(), [](int n) { return GangJobStateName(v1::GangJobState(n)); },
       false},
      {v1::RankState_descriptor(), [](int n) { return RankStateName(v1::RankState(n)); }, false},
      {v1::WorkerState_descriptor(), [](int n) { return WorkerStateName(v1::WorkerState(n)); },
       false},
      {v1::PlacementStrategy_descriptor(),
       [](int n) { return PlacementStrategyName(v1::PlacementStrategy(n)); }, false},
  };
}

// "NODE_STATE_ALIVE" of NodeState -> "ALIVE" (or "alive"): the word each value must be shown as.
std::string ExpectedWord(const Family& family, const google::protobuf::EnumValueDescriptor& value) {
  // The value prefix is the enum name in UPPER_SNAKE: NodeState -> NODE_STATE_.
  std::string prefix;
  for (char c : family.type->name()) {
    if (absl::ascii_isupper(c) && !prefix.empty()) prefix += '_';
    prefix += absl::ascii_toupper(c);
  }
  prefix += '_';
  EXPECT_TRUE(absl::StartsWith(value.name(), prefix)) << value.full_name();
  std::string word = value.name().substr(prefix.size());
  return family.lower_case ? absl::AsciiStrToLower(word) : word;
}

TEST(StateNamesTest, EveryValueOfEveryEnumHasItsOwnWord) {
  for (const Family& family : Families()) {
    std::set<std::string_view> words;
    for (int i = 0; i < family.type->value_count(); ++i) {
      const google::protobuf::EnumValueDescriptor& value = *family.type->value(i);
      if (value.number() == 0) continue;  // UNSPECIFIED, below
      const std::string_view word = family.word(value.number());
      EXPECT_EQ(word, ExpectedWord(family, value)) << value.full_name() << " has no word";
      EXPECT_TRUE(words.insert(word).second) << value.full_name() << " shares the word " << word;
      EXPECT_EQ(StateWordOf(value), word) << value.full_name();
      EXPECT_EQ(StateValueOf(*family.type, word), &value) << value.full_name();
    }
  }
}

TEST(StateNamesTest, UnspecifiedAndUnknownNumbersAreUnknown) {
  for (const Family& family : Families()) {
    const std::string unknown = family.lower_case ? "unknown" : "UNKNOWN";
    EXPECT_EQ(family.word(0), unknown) << family.type->full_name();
    EXPECT_EQ(family.word(999), unknown) << family.type->full_name();
  }
}

TEST(StateNamesTest, TheWordsUsersAndScriptsReadStayTheSame) {
  EXPECT_EQ(NodeStateName(v1::NODE_STATE_ALIVE), "ALIVE");
  EXPECT_EQ(PlacementGroupStateName(v1::PLACEMENT_GROUP_STATE_CREATED), "CREATED");
  EXPECT_EQ(SliceGroupStateName(v1::SLICE_GROUP_STATE_BROKEN), "BROKEN");
  EXPECT_EQ(JobStateName(v1::JOB_STATE_SUCCEEDED), "SUCCEEDED");
  EXPECT_EQ(DemandStatusName(v1::DEMAND_STATUS_INFEASIBLE), "infeasible");
  EXPECT_EQ(PickStatusName(v1::PICK_STATUS_PLACED), "placed");
  EXPECT_EQ(GangJobStateName(v1::GANG_JOB_STATE_RESTARTING), "RESTARTING");
  EXPECT_EQ(RankStateName(v1::RANK_STATE_STOPPED), "STOPPED");
  EXPECT_EQ(WorkerStateName(v1::WORKER_STATE_EXITED), "EXITED");
  EXPECT_EQ(PlacementStrategyName(v1::PLACEMENT_STRATEGY_STRICT_SPREAD), "STRICT_SPREAD");
}

// The C++ API's gang states are shown in their protocol values' words, and each word reads back
// (StateValueOf, as a status.json is read) as the state it came from: every state of the protocol
// has one of the API's, with its own word.
TEST(StateNamesTest, TheApisGangStatesRoundTripThroughTheirWords) {
  const std::vector<GangState> gang = {
      GangState::kPending,   GangState::kStarting, GangState::kRunning, GangState::kRestarting,
      GangState::kSucceeded, GangState::kFailed,   GangState::kStopped};
  std::set<std::string_view> gang_words;
  for (GangState state : gang) {
    const std::string_view word = GangStateName(state);
    EXPECT_TRUE(gang_words.insert(word).second) << word;
    const google::protobuf::EnumValueDescriptor* value =
        StateValueOf(*v1::GangJobState_descriptor(), word);
    ASSERT_NE(value, nullptr) << word;
    EXPECT_EQ(GangStateName(static_cast<GangState>(value->number())), word);
    EXPECT_TRUE(static_cast<GangState>(value->number()) == state) << word;
  }
  EXPECT_EQ(gang_words.size(),
            static_cast<size_t>(v1::GangJobState_descriptor()->value_count() - 1));

  const std::vector<GangRankState> rank = {GangRankState::kStarting, GangRankState::kRunning,
                                           GangRankState::kSucceeded, GangRankState::kFailed,
                                           GangRankState::kStopped};
  std::set<std::string_view> rank_words;
  for (GangRankState state : rank) {
    const std::string_view word = GangRankStateName(state);
    EXPECT_TRUE(rank_words.insert(word).second) << word;
    const google::protobuf::EnumValueDescriptor* value =
        StateValueOf(*v1::RankState_descriptor(), word);
    ASSERT_NE(value, nullptr) << word;
    EXPECT_TRUE(static_cast<GangRankState>(value->number()) == state) << word;
  }
  EXPECT_EQ(rank_words.size(), static_cast<size_t>(v1::RankState_descriptor()->value_count() - 1));

  EXPECT_EQ(GangStateName(GangState::kRestarting), "RESTARTING");
  EXPECT_EQ(GangRankStateName(GangRankState::kFailed), "FAILED");
}

TEST(StateNamesTest, AWordOfNoValueReadsAsNone) {
  EXPECT_EQ(StateValueOf(*v1::NodeState_descriptor(), "SIDEWAYS"), nullptr);
  EXPECT_EQ(StateValueOf(*v1::NodeState_descriptor(), "alive"), nullptr);   // words are exact
  EXPECT_EQ(StateValueOf(*v1::ActorState_descriptor(), "ALIVE"), nullptr);  // not shown here
}

TEST(StateNamesTest, OtherEnumsHaveNoWordHere) {
  const google::protobuf::EnumValueDescriptor* actor =
      v1::ActorState_descriptor()->FindValueByNumber(v1::ACTOR_STATE_ALIVE);
  ASSERT_NE(actor, nullptr);
  EXPECT_FALSE(StateWordOf(*actor).has_value());
}

}  // namespace
}  // namespace tessera::rpc
