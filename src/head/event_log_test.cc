#include "head/event_log.h"

#include <gtest/gtest.h>

namespace tessera {
namespace {

TEST(EventLogTest, EventsAreStampedByTheHeadsClock) {
  FakeClock clock;
  EventLog log(/*max_events=*/3, &clock);
  log.Record("first");
  clock.Advance(absl::Minutes(5));
  log.RecordChange("five minutes later", "node");
  int64_t next = 0;
  auto events = log.Since(0, 10, &next);
  ASSERT_EQ(events.size(), 2u);
  EXPECT_EQ(events[1].time - events[0].time, absl::Minutes(5));
  EXPECT_EQ(events[1].time, clock.Now());
}

TEST(EventLogTest, AReaderFollowsTheStreamBySequenceNumber) {
  EventLog log(/*max_events=*/3, Clock::Real());
  log.Record("node n1 joined", "node");
  log.Record("placement group g created", "reservation");
  int64_t next = 0;
  auto first = log.Since(0, 10, &next);
  ASSERT_EQ(first.size(), 2u);
  EXPECT_EQ(first[0].seq, 1);
  EXPECT_EQ(first[0].kind, "node");
  EXPECT_EQ(first[1].message, "placement group g created");
  EXPECT_EQ(next, 2);
  EXPECT_TRUE(log.Since(next, 10, &next).empty());
  EXPECT_EQ(next, 2);
  log.Record("node n1 was declared dead", "node");
  log.Record("head restarted");            // kind "head"
  auto later = log.Since(next, 1, &next);  // limited to one
  ASSERT_EQ(later.size(), 1u);
  EXPECT_EQ(later[0].seq, 3);
  EXPECT_EQ(log.Since(next, 10, &next)[0].kind, "head");
  // The oldest went past the bound; List keeps the messages.
  EXPECT_EQ(log.List().size(), 3u);
  EXPECT_EQ(log.Since(0, 10, &next).front().seq, 2);
}

TEST(EventLogTest, ChangesAreInTheStreamButNotAmongTheNotices) {
  EventLog log(/*max_events=*/10, Clock::Real());
  log.RecordChange("node n1 joined", "node");
  log.Record("node n1 declared dead: no heartbeat for 10s", "node");
  log.RecordChange("job j1 started", "job");
  EXPECT_EQ(log.List(), std::vector<std::string>{"node n1 declared dead: no heartbeat for 10s"});
  int64_t next = 0;
  auto all = log.Since(0, 10, &next);
  ASSERT_EQ(all.size(), 3u);
  EXPECT_FALSE(all[0].notice);
  EXPECT_EQ(all[0].kind, "node");
  EXPECT_TRUE(all[1].notice);
  EXPECT_FALSE(all[2].notice);
  EXPECT_EQ(all[2].message, "job j1 started");
}

}  // namespace
}  // namespace tessera
