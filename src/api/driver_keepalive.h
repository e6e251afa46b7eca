// DriverKeepAlive: tells the head, every `period`, that this driver still runs, so the placement
// groups and slice groups it owns (created without `detached`) stay; on Stop it says the driver
// exited, and the head releases them at once. A driver that dies without Stop (killed) falls
// silent, and the head releases them after its driver timeout (HeadServiceOptions).
//
// Threading: thread-safe. One thread of its own, from construction until Stop (or destruction).
#pragma once

#include <string>
#include <thread>

#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "tessera/v1/head.grpc.pb.h"

namespace tessera::api {

class DriverKeepAlive {
 public:
  // `head` must outlive this object. Calls that fail (the head restarting) are retried at the
  // next period.
  DriverKeepAlive(v1::HeadReservations::Stub* head, std::string driver_id,
                  absl::Duration period = absl::Seconds(1));
  ~DriverKeepAlive();  // Stop()
  DriverKeepAlive(const DriverKeepAlive&) = delete;
  DriverKeepAlive& operator=(const DriverKeepAlive&) = delete;

  // Ends the thread, then tells the head this driver exited (one call, bounded). Idempotent.
  void Stop();

 private:
  void Beat() const;

  v1::HeadReservations::Stub* const head_;
  const std::string driver_id_;
  const absl::Duration period_;
  absl::Notification stop_;
  std::thread thread_;
};

}  // namespace tessera::api
