#include "api/driver_keepalive.h"

#include <utility>

#include "base/ignore_status.h"
#include "rpc/auth.h"
#include "rpc/status_conversion.h"

namespace tessera::api {

DriverKeepAlive::DriverKeepAlive(v1::HeadReservations::Stub* head, std::string driver_id,
                                 absl::Duration period)
    : head_(head), driver_id_(std::move(driver_id)), period_(period) {
  thread_ = std::thread([this] {
    do {
      Beat();
    } while (!stop_.WaitForNotificationWithTimeout(period_));
  });
}

DriverKeepAlive::~DriverKeepAlive() { Stop(); }

void DriverKeepAlive::Beat() const {
  v1::KeepDriverAliveRequest request;
  request.set_driver_id(driver_id_);
  v1::KeepDriverAliveResponse response;
  grpc::ClientContext context;
  rpc::ConfigureClientContext(&context, period_);
  IgnoreStatus(rpc::FromGrpcStatus(head_->KeepDriverAlive(&context, request, &response)),
               "a missed beat is made up by the next; the head waits a whole driver timeout");
}

void DriverKeepAlive::Stop() {
  if (!thread_.joinable()) return;
  stop_.Notify();
  thread_.join();
  v1::DriverExitedRequest request;
  request.set_driver_id(driver_id_);
  v1::DriverExitedResponse response;
  grpc::ClientContext context;
  rpc::ConfigureClientContext(&context, absl::Seconds(5));
  IgnoreStatus(rpc::FromGrpcStatus(head_->DriverExited(&context, request, &response)),
               "best effort: a head that does not answer releases them after its driver timeout");
}

}  // namespace tessera::api
