// WakeableEpoll: an epoll instance with an eventfd registered in it, the way a loop thread that
// sleeps in epoll_wait is woken from other threads (ProcessSupervisor's reaper, LauncherPool's
// refill thread). Thread-safe: WakeEventFd may be called from any thread.
#pragma once

#include <cstdint>

#include "absl/status/statusor.h"
#include "process/unique_fd.h"

namespace tessera {

struct WakeableEpoll {
  UniqueFd epoll;
  UniqueFd wake;  // non-blocking eventfd, registered for EPOLLIN with data.u64 = the wake key
};

// Errors name the failing call.
absl::StatusOr<WakeableEpoll> CreateWakeableEpoll(uint64_t wake_key);

// Makes a thread in epoll_wait on the instance return.
void WakeEventFd(int wake_fd);
// Resets the eventfd after a wake-up was seen, so the next epoll_wait sleeps again.
void DrainEventFd(int wake_fd);

}  // namespace tessera
