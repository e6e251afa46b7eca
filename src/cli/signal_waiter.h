// SignalWaiter: how a command that follows something on the cluster (`tessera run`, a foreground
// `tessera train`) takes SIGINT, SIGTERM and SIGHUP. They are blocked in every thread (construct
// it before any gRPC thread exists, so those inherit the mask) and handed, one at a time, to a
// callback on one waiting thread, which forwards or stops what the command follows.
//
// Thread-safe: Start once, then Stop (or the destructor) from any other thread.
#pragma once

#include <signal.h>

#include <functional>
#include <thread>

namespace tessera::cli {

class SignalWaiter {
 public:
  SignalWaiter();
  ~SignalWaiter() { Stop(); }
  SignalWaiter(const SignalWaiter&) = delete;
  SignalWaiter& operator=(const SignalWaiter&) = delete;

  void Start(std::function<void(int signal)> on_signal);
  // Ends the waiting thread; signals that come later stay blocked.
  void Stop();

 private:
  sigset_t set_;
  std::thread thread_;
};

}  // namespace tessera::cli
