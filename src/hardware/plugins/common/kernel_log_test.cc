// KernelLog over the files tests write /dev/kmsg records into: a regular file (history skipped,
// appended records read), a FIFO (nothing blocks), sequence gaps counted as lost, continuation
// and malformed lines skipped, a path that cannot be opened said once.
#include "hardware/plugins/common/kernel_log.h"

#include <fcntl.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <string>

#include "hardware/testing/fake_tree.h"

namespace tessera {
namespace {

using ::testing::ElementsAre;
using ::testing::Field;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

void Append(const std::string& path, const std::string& text) {
  std::ofstream(path, std::ios::app) << text;
}

TEST(KernelLogTest, ReadsOnlyRecordsWrittenAfterItOpened) {
  testing::FakeTree tree;
  const std::string path = tree.Write("/kmsg", "6,1,100,-;before the agent started\n");
  KernelLog log(path);
  EXPECT_EQ(log.error(), "");
  EXPECT_THAT(log.ReadNew(100), IsEmpty());
  Append(path,
         "4,2,200,-;NVRM: Xid (PCI:0000:01:00): 79, GPU has fallen off the bus.\n"
         " SUBSYSTEM=pci\n"
         " DEVICE=+pci:0000:01:00.0\n"
         "6,3,300,-;second\n");
  EXPECT_THAT(log.ReadNew(100),
              ElementsAre(Field(&KernelLogRecord::text,
                                "NVRM: Xid (PCI:0000:01:00): 79, GPU has fallen off the bus."),
                          Field(&KernelLogRecord::text, "second")));
  EXPECT_EQ(log.lost(), 0u);
  // A record half written is read once it is whole.
  Append(path, "6,4,400,-;thi");
  EXPECT_THAT(log.ReadNew(100), IsEmpty());
  Append(path, "rd\n");
  EXPECT_THAT(log.ReadNew(100), ElementsAre(Field(&KernelLogRecord::seq, 4u)));
}

TEST(KernelLogTest, GapsInTheSequenceCountAsLostAndMalformedLinesAreSkipped) {
  testing::FakeTree tree;
  const std::string path = tree.Write("/kmsg");
  KernelLog log(path);
  Append(path, "6,10,1,-;a\nnot a record\n6,x,1,-;bad seq\n6,14,1,-;b\n");
  EXPECT_THAT(log.ReadNew(100),
              ElementsAre(Field(&KernelLogRecord::seq, 10u), Field(&KernelLogRecord::seq, 14u)));
  EXPECT_EQ(log.lost(), 3u);
}

TEST(KernelLogTest, AFifoWithoutDataOrWriterNeverBlocks) {
  testing::FakeTree tree;
  const std::string path = tree.Path("/kmsg");
  ASSERT_EQ(::mkfifo(path.c_str(), 0600), 0);
  KernelLog log(path);  // opens at once, with no writer
  EXPECT_EQ(log.error(), "");
  EXPECT_THAT(log.ReadNew(100), IsEmpty());
  const int writer = ::open(path.c_str(), O_WRONLY | O_NONBLOCK);
  ASSERT_GE(writer, 0);
  EXPECT_THAT(log.ReadNew(100), IsEmpty());  // a writer, no data: EAGAIN
  const std::string record = "3,7,9,-;from the pipe\n";
  ASSERT_EQ(::write(writer, record.data(), record.size()), static_cast<ssize_t>(record.size()));
  EXPECT_THAT(log.ReadNew(100), ElementsAre(Field(&KernelLogRecord::text, "from the pipe")));
  ::close(writer);
  EXPECT_THAT(log.ReadNew(100), IsEmpty());
}

TEST(KernelLogTest, APathThatCannotBeOpenedSaysWhy) {
  KernelLog log("/nonexistent/kmsg");
  EXPECT_THAT(log.error(), HasSubstr("cannot read the kernel log /nonexistent/kmsg"));
  EXPECT_THAT(log.ReadNew(10), IsEmpty());
}

TEST(KernelLogTest, TheLiveMachineReadsDevKmsgAndAFakeTreeNothingUnlessNamed) {
  EXPECT_EQ(KernelLogPath(DeviceErrorContext{Sysroot("/"), {}}), "/dev/kmsg");
  EXPECT_EQ(KernelLogPath(DeviceErrorContext{Sysroot("/tmp/tree"), {}}), "");
  EXPECT_EQ(KernelLogPath(DeviceErrorContext{Sysroot("/tmp/tree"), {.kernel_log = "/tmp/k"}}),
            "/tmp/k");
}

}  // namespace
}  // namespace tessera
