#include "base/callback_anchor.h"

#include <gtest/gtest.h>

#include <memory>
#include <thread>

#include "absl/synchronization/notification.h"

namespace tessera {
namespace {

struct Counter {
  int calls = 0;
};

TEST(CallbackAnchorTest, RunsWhileAttachedAndNothingOnceDetached) {
  auto anchor = std::make_shared<CallbackAnchor<Counter>>();
  Counter counter;
  anchor->Run([](Counter& c) { ++c.calls; });  // not attached yet
  anchor->Attach(&counter);
  anchor->Run([](Counter& c) { ++c.calls; });
  anchor->Detach();
  anchor->Run([](Counter& c) { ++c.calls; });
  EXPECT_EQ(counter.calls, 1);
}

TEST(CallbackAnchorTest, DetachWaitsForACallbackRunningNow) {
  auto anchor = std::make_shared<CallbackAnchor<Counter>>();
  auto counter = std::make_unique<Counter>();
  anchor->Attach(counter.get());
  absl::Notification inside;
  absl::Notification release;
  std::thread callback([&] {
    anchor->Run([&](Counter& c) {
      inside.Notify();
      release.WaitForNotification();
      ++c.calls;  // the target is still alive: Detach has not returned
    });
  });
  inside.WaitForNotification();
  absl::Notification detached;
  std::thread owner([&] {
    anchor->Detach();
    detached.Notify();
  });
  EXPECT_FALSE(detached.WaitForNotificationWithTimeout(absl::Milliseconds(50)));
  release.Notify();
  callback.join();
  owner.join();
  EXPECT_TRUE(detached.HasBeenNotified());
  EXPECT_EQ(counter->calls, 1);
}

}  // namespace
}  // namespace tessera
