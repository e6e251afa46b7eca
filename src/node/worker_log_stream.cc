#include "node/worker_log_stream.h"

#include <atomic>
#include <memory>
#include <thread>
#include <utility>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "process/log_reader.h"

namespace tessera {

absl::Status StreamWorkerLogs(const WorkerLogFiles& files, const WorkerLogStreamOptions& options,
                              const WorkerLogStreamHooks& hooks) {
  struct Followed {
    bool is_stderr;
    std::unique_ptr<LogFollower> follower;
    absl::Status status;  // written by its thread, read after the join
  };
  std::vector<Followed> followed;
  for (bool is_stderr : {false, true}) {
    if (!(is_stderr ? options.want_stderr : options.want_stdout)) continue;
    auto follower = LogFollower::Create(is_stderr ? files.stderr_path : files.stdout_path);
    if (!follower.ok()) return follower.status();
    followed.push_back(Followed{is_stderr, *std::move(follower), absl::OkStatus()});
  }
  if (!options.follow) {
    for (Followed& f : followed) f.follower->WriterExited();
  }

  absl::Mutex send_mu;
  std::atomic<bool> gone{false};
  std::vector<std::thread> threads;
  for (Followed& f : followed) {
    threads.emplace_back([&, target = &f] {
      while (!gone.load()) {
        auto segment = target->follower->NextWithin(options.check_interval);
        if (!segment.ok()) {
          target->status = segment.status();
          return;
        }
        if (!segment->has_value()) return;  // everything read
        std::string& data = (*segment)->data;
        if (data.empty()) continue;  // nothing new yet: look at `gone` again
        absl::MutexLock lock(&send_mu);
        if (gone.load()) return;
        if (!hooks.send(target->is_stderr, std::move(data))) gone.store(true);
      }
    });
  }
  // Following: the bytes a worker wrote are in its files once it has exited, so the followers
  // stop at the end of the files only after that.
  while (options.follow && !gone.load()) {
    if (hooks.await_exit(options.check_interval)) {
      for (Followed& f : followed) f.follower->WriterExited();
      break;
    }
    if (hooks.should_stop()) gone.store(true);
    if (hooks.tick && !gone.load()) {
      absl::MutexLock lock(&send_mu);
      if (!hooks.tick()) gone.store(true);
    }
  }
  if (gone.load()) {
    for (Followed& f : followed) f.follower->Stop();
  }
  for (std::thread& t : threads) t.join();
  if (gone.load()) return absl::CancelledError("the client went away");
  for (const Followed& f : followed) {
    if (!f.status.ok()) return f.status;
  }
  return absl::OkStatus();
}

}  // namespace tessera
