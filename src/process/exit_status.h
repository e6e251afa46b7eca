// ExitStatus: how a child process ended, in numbers for programs and in one line for people
// ("exited with code 3", "killed by signal 9 (SIGKILL)", "out of memory (killed by the kernel's
// OOM killer)"). The fields match the protocol's WorkerExit.
// Thread-compatible: a value type.
#pragma once

#include <string>

namespace tessera {

// Where an out-of-memory verdict came from.
enum class OomEvidence {
  kNone,
  // The child's own cgroup counted an OOM kill (memory.events oom_kill): certain.
  kCgroup,
  // No cgroup: the child died of SIGKILL that Tessera did not send while the host's OOM kill
  // counter (/proc/vmstat oom_kill) rose. A heuristic: another process killed by the OOM killer
  // at the same moment, or a SIGKILL from someone else, reads the same.
  kHostCounter,
};

struct ExitStatus {
  int exit_code = -1;  // the code passed to exit(); -1 when killed by a signal
  int signal = 0;      // the signal that killed it; 0 when it exited
  bool core_dumped = false;
  bool out_of_memory = false;
  OomEvidence oom_evidence = OomEvidence::kNone;
  std::string reason;  // one line, see DescribeExit

  bool success() const { return signal == 0 && exit_code == 0 && !out_of_memory; }
  friend bool operator==(const ExitStatus&, const ExitStatus&) = default;
};

// The status for a wait status word (as waitpid returns it).
ExitStatus ExitStatusFromWaitStatus(int wait_status);
// The status for waitid's si_code/si_status (CLD_EXITED, CLD_KILLED, CLD_DUMPED).
ExitStatus ExitStatusFromSiginfo(int child_code, int child_status);

// Marks `status` out of memory with `evidence` and rewrites its reason.
void MarkOutOfMemory(OomEvidence evidence, ExitStatus& status);

// The one-line reason for the fields of `status` (exit_code, signal, core_dumped, out_of_memory,
// oom_evidence).
std::string DescribeExit(const ExitStatus& status);

// "SIGKILL" for 9; "SIGRTMIN+3" for real-time signals; "signal 99" when unknown.
std::string SignalName(int signal);

}  // namespace tessera
