#include "vocabulary/ids.h"

#include <gtest/gtest.h>

#include <concepts>
#include <set>
#include <sstream>
#include <string>
#include <type_traits>

namespace tessera {
namespace {

// Ids of different kinds neither convert into one another nor compare: passing a job's id where
// an actor's is expected, or a slice group's name where a placement group's is, does not compile.
static_assert(!std::is_convertible_v<JobId, ActorId>);
static_assert(!std::is_constructible_v<ActorId, JobId>);
static_assert(!std::is_convertible_v<PlacementGroupName, SliceGroupName>);
static_assert(!std::is_constructible_v<SliceGroupName, PlacementGroupName>);
static_assert(!std::is_convertible_v<NodeId, JobId>);
static_assert(!std::equality_comparable_with<JobId, ActorId>);
static_assert(!std::equality_comparable_with<PlacementGroupName, SliceGroupName>);
static_assert(!std::equality_comparable_with<NodeId, ActorId>);
// Nor does text become one unnoticed: a string is made an id by naming the type.
static_assert(!std::is_convertible_v<std::string, JobId>);
static_assert(!std::is_convertible_v<const char*, PlacementGroupName>);
static_assert(!std::equality_comparable_with<JobId, std::string>);
static_assert(std::is_constructible_v<JobId, std::string>);
static_assert(std::totally_ordered<ActorId>);  // map keys

TEST(IdsTest, AnIdIsItsTextAndPrintsAsIt) {
  const JobId job("job-1a2b3c4d");
  EXPECT_EQ(job.value(), "job-1a2b3c4d");
  std::ostringstream printed;
  printed << job << " " << PlacementGroupName("train");
  EXPECT_EQ(printed.str(), "job-1a2b3c4d train");
  EXPECT_TRUE(JobId().value().empty());
}

TEST(IdsTest, IdsOfOneKindCompareAndOrderByTheirText) {
  EXPECT_EQ(ActorId("ab"), ActorId("ab"));
  EXPECT_NE(ActorId("ab"), ActorId("cd"));
  const std::set<SliceGroupName> names = {SliceGroupName("s2"), SliceGroupName("s1"),
                                          SliceGroupName("s2")};
  ASSERT_EQ(names.size(), 2u);
  EXPECT_EQ(names.begin()->value(), "s1");
}

}  // namespace
}  // namespace tessera
