#include "process/exit_status.h"

#include <signal.h>
#include <string.h>
#include <sys/wait.h>

#include "absl/strings/str_cat.h"

namespace tessera {

ExitStatus ExitStatusFromWaitStatus(int wait_status) {
  ExitStatus status;
  if (WIFEXITED(wait_status)) {
    status.exit_code = WEXITSTATUS(wait_status);
  } else if (WIFSIGNALED(wait_status)) {
    status.signal = WTERMSIG(wait_status);
    status.core_dumped = WCOREDUMP(wait_status);
  }
  status.reason = DescribeExit(status);
  return status;
}

ExitStatus ExitStatusFromSiginfo(int child_code, int child_status) {
  ExitStatus status;
  if (child_code == CLD_EXITED) {
    status.exit_code = child_status;
  } else {
    status.signal = child_status;
    status.core_dumped = child_code == CLD_DUMPED;
  }
  status.reason = DescribeExit(status);
  return status;
}

void MarkOutOfMemory(OomEvidence evidence, ExitStatus& status) {
  status.out_of_memory = evidence != OomEvidence::kNone;
  status.oom_evidence = evidence;
  status.reason = DescribeExit(status);
}

std::string SignalName(int signal) {
  if (signal >= SIGRTMIN && signal <= SIGRTMAX) {
    return signal == SIGRTMIN ? "SIGRTMIN" : absl::StrCat("SIGRTMIN+", signal - SIGRTMIN);
  }
  const char* abbrev = sigabbrev_np(signal);
  if (abbrev == nullptr) return absl::StrCat("signal ", signal);
  return absl::StrCat("SIG", abbrev);
}

std::string DescribeExit(const ExitStatus& status) {
  std::string how = status.signal == 0 ? absl::StrCat("exited with code ", status.exit_code)
                                       : absl::StrCat("killed by signal ", status.signal, " (",
                                                      SignalName(status.signal), ")",
                                                      status.core_dumped ? ", core dumped" : "");
  switch (status.oom_evidence) {
    case OomEvidence::kNone: return how;
    case OomEvidence::kCgroup:
      if (status.signal == SIGKILL) return "out of memory (killed by the kernel's OOM killer)";
      // The OOM killer took another process of the worker (a child); the leader ended otherwise.
      return absl::StrCat(
          how, " after the kernel's OOM killer killed one of its processes (out of memory)");
    case OomEvidence::kHostCounter:
      return "out of memory (killed by SIGKILL while the kernel's OOM killer was active; "
             "no cgroup to confirm it)";
  }
  return how;
}

}  // namespace tessera
