#include "process/wakeable_epoll.h"

#include <errno.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "process/file_util.h"

namespace tessera {

absl::StatusOr<WakeableEpoll> CreateWakeableEpoll(uint64_t wake_key) {
  WakeableEpoll loop;
  loop.epoll = UniqueFd(::epoll_create1(EPOLL_CLOEXEC));
  if (!loop.epoll.valid()) return ErrnoStatus(errno, "cannot create an epoll instance");
  loop.wake = UniqueFd(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
  if (!loop.wake.valid()) return ErrnoStatus(errno, "cannot create an eventfd");
  struct epoll_event event = {};
  event.events = EPOLLIN;
  event.data.u64 = wake_key;
  if (::epoll_ctl(loop.epoll.get(), EPOLL_CTL_ADD, loop.wake.get(), &event) != 0) {
    return ErrnoStatus(errno, "cannot watch the eventfd");
  }
  return loop;
}

void WakeEventFd(int wake_fd) {
  uint64_t one = 1;
  ssize_t ignored = ::write(wake_fd, &one, sizeof(one));
  (void)ignored;  // a full counter is still readable: the wake-up is not lost
}

void DrainEventFd(int wake_fd) {
  uint64_t count;
  ssize_t ignored = ::read(wake_fd, &count, sizeof(count));
  (void)ignored;
}

}  // namespace tessera
