#include "cli/signal_waiter.h"

#include <pthread.h>

#include <utility>

namespace tessera::cli {
namespace {
// Sent by Stop to the waiting thread only.
constexpr int kWake = SIGUSR2;
}  // namespace

SignalWaiter::SignalWaiter() {
  sigemptyset(&set_);
  for (int s : {SIGINT, SIGTERM, SIGHUP, kWake}) sigaddset(&set_, s);
  pthread_sigmask(SIG_BLOCK, &set_, nullptr);
}

void SignalWaiter::Start(std::function<void(int)> on_signal) {
  thread_ = std::thread([this, on_signal = std::move(on_signal)] {
    while (true) {
      int sig = 0;
      if (sigwait(&set_, &sig) != 0 || sig == kWake) return;
      on_signal(sig);
    }
  });
}

void SignalWaiter::Stop() {
  if (!thread_.joinable()) return;
  pthread_kill(thread_.native_handle(), kWake);
  thread_.join();
}

}  // namespace tessera::cli
