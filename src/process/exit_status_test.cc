#include "process/exit_status.h"

#include <signal.h>
#include <sys/wait.h>

#include "gtest/gtest.h"

namespace tessera {
namespace {

TEST(ExitStatusTest, ExitedWithCode) {
  ExitStatus status = ExitStatusFromSiginfo(CLD_EXITED, 3);
  EXPECT_EQ(status.exit_code, 3);
  EXPECT_EQ(status.signal, 0);
  EXPECT_FALSE(status.success());
  EXPECT_EQ(status.reason, "exited with code 3");
  EXPECT_TRUE(ExitStatusFromSiginfo(CLD_EXITED, 0).success());
}

TEST(ExitStatusTest, KilledBySignal) {
  ExitStatus status = ExitStatusFromSiginfo(CLD_KILLED, SIGKILL);
  EXPECT_EQ(status.exit_code, -1);
  EXPECT_EQ(status.signal, 9);
  EXPECT_EQ(status.reason, "killed by signal 9 (SIGKILL)");
  EXPECT_EQ(ExitStatusFromSiginfo(CLD_DUMPED, SIGSEGV).reason,
            "killed by signal 11 (SIGSEGV), core dumped");
}

TEST(ExitStatusTest, FromWaitStatusWord) {
  EXPECT_EQ(ExitStatusFromWaitStatus(7 << 8).reason, "exited with code 7");
  EXPECT_EQ(ExitStatusFromWaitStatus(SIGTERM).reason, "killed by signal 15 (SIGTERM)");
}

TEST(ExitStatusTest, OutOfMemoryReasons) {
  ExitStatus killed = ExitStatusFromSiginfo(CLD_KILLED, SIGKILL);
  MarkOutOfMemory(OomEvidence::kCgroup, killed);
  EXPECT_TRUE(killed.out_of_memory);
  EXPECT_FALSE(killed.success());
  EXPECT_EQ(killed.reason, "out of memory (killed by the kernel's OOM killer)");

  ExitStatus exited = ExitStatusFromSiginfo(CLD_EXITED, 1);
  MarkOutOfMemory(OomEvidence::kCgroup, exited);
  EXPECT_EQ(exited.reason,
            "exited with code 1 after the kernel's OOM killer killed one of its processes (out of "
            "memory)");

  ExitStatus guessed = ExitStatusFromSiginfo(CLD_KILLED, SIGKILL);
  MarkOutOfMemory(OomEvidence::kHostCounter, guessed);
  EXPECT_EQ(guessed.reason,
            "out of memory (killed by SIGKILL while the kernel's OOM killer was active; no cgroup "
            "to confirm it)");
}

TEST(ExitStatusTest, SignalNames) {
  EXPECT_EQ(SignalName(SIGTERM), "SIGTERM");
  EXPECT_EQ(SignalName(SIGUSR1), "SIGUSR1");
  EXPECT_EQ(SignalName(SIGRTMIN + 2), "SIGRTMIN+2");
  EXPECT_EQ(SignalName(200), "signal 200");
}

}  // namespace
}  // namespace tessera
