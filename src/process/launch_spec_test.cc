#include "process/launch_spec.h"

#include <cstring>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "process/launch_wire.h"

namespace tessera {
namespace {

using ::testing::HasSubstr;

namespace wire = launch_wire;

LaunchSpec Sample() {
  LaunchSpec spec;
  spec.argv = {"python3", "-c", "print('two words')", ""};
  spec.env = {"A=1", "EMPTY=", "PATH=/usr/bin:/bin", "WITH=EQUALS=INSIDE"};
  spec.cwd = "/work dir";
  spec.stdout_path = "/state/nodes/n1/workers/w1.out";
  spec.stderr_path = "";
  spec.stdin_path = "/state/nodes/n1/workers/w1.in";
  return spec;
}

// The error DecodeLaunchSpec gives for `bytes`, "" when it parses.
std::string ErrorOf(const std::string& bytes) {
  auto decoded = DecodeLaunchSpec(bytes);
  if (decoded.ok()) return "";
  EXPECT_EQ(decoded.status().code(), absl::StatusCode::kInvalidArgument);
  return std::string(decoded.status().message());
}

void PutU32(std::string& bytes, size_t at, uint32_t value) {
  wire::StoreU32(reinterpret_cast<unsigned char*>(bytes.data() + at), value);
}

TEST(LaunchSpecTest, RoundTripsEveryField) {
  const std::string bytes = EncodeLaunchSpec(Sample());
  auto decoded = DecodeLaunchSpec(bytes);
  ASSERT_TRUE(decoded.ok()) << decoded.status();
  EXPECT_EQ(*decoded, Sample());
  EXPECT_EQ(EncodeLaunchSpec(*decoded), bytes);
}

TEST(LaunchSpecTest, HeaderIsMagicVersionAndBodySize) {
  const std::string bytes = EncodeLaunchSpec(Sample());
  ASSERT_GE(bytes.size(), wire::kSpecHeaderBytes);
  EXPECT_EQ(bytes.substr(0, 4), "TSLS");
  const auto* header = reinterpret_cast<const unsigned char*>(bytes.data());
  EXPECT_EQ(wire::LoadU32(header + 4), 2u);
  EXPECT_EQ(wire::LoadU32(header + 8), bytes.size() - wire::kSpecHeaderBytes);
}

TEST(LaunchSpecTest, FromChildSpecKeepsEverythingWithTheEnvironmentInKeyOrder) {
  ChildSpec child;
  child.argv = {"tool", "--flag"};
  child.env = {{"Z", "last"}, {"A", "first"}};
  child.cwd = "/tmp";
  child.stdout_path = "/tmp/out";
  child.stderr_path = "/tmp/err";
  LaunchSpec spec = LaunchSpecFromChild(child);
  EXPECT_EQ(spec.argv, child.argv);
  EXPECT_EQ(spec.env, (std::vector<std::string>{"A=first", "Z=last"}));
  EXPECT_EQ(spec.cwd, "/tmp");
  EXPECT_EQ(spec.stdout_path, "/tmp/out");
  EXPECT_EQ(spec.stderr_path, "/tmp/err");
}

TEST(LaunchSpecTest, RefusesAWrongHeader) {
  const std::string good = EncodeLaunchSpec(Sample());
  EXPECT_EQ(ErrorOf(""), "launch spec is shorter than its header");
  std::string magic = good;
  magic[0] = 'X';
  EXPECT_EQ(ErrorOf(magic), "launch spec has a wrong magic number");
  std::string version = good;
  PutU32(version, 4, 1);
  EXPECT_EQ(ErrorOf(version), "launch spec has version 1, this launcher reads version 2");
  std::string huge = good;
  PutU32(huge, 8, wire::kMaxSpecBytes + 1);
  EXPECT_THAT(ErrorOf(huge), HasSubstr("is over the limit"));
  std::string shorter = good;
  shorter.pop_back();
  EXPECT_THAT(ErrorOf(shorter), HasSubstr("header announces"));
}

// A body with the header recomputed, so the body's own checks are what fails.
std::string WithBody(const std::string& body) {
  std::string bytes(wire::kSpecHeaderBytes, '\0');
  PutU32(bytes, 0, wire::kSpecMagic);
  PutU32(bytes, 4, wire::kSpecVersion);
  PutU32(bytes, 8, static_cast<uint32_t>(body.size()));
  return bytes + body;
}

std::string U32(uint32_t value) {
  std::string bytes(4, '\0');
  PutU32(bytes, 0, value);
  return bytes;
}

std::string Str(const std::string& s) {
  return U32(static_cast<uint32_t>(s.size())) + s + std::string(1, '\0');
}

TEST(LaunchSpecTest, RefusesMalformedBodiesWithOneLineReasons) {
  const std::string tail =
      U32(0) + Str("") + Str("") + Str("") + Str("");  // no env, cwd, logs, stdin
  EXPECT_EQ(ErrorOf(WithBody(U32(1) + Str("prog") + tail)), "");
  EXPECT_EQ(ErrorOf(WithBody("")), "launch spec is truncated at the argv count");
  EXPECT_EQ(ErrorOf(WithBody(U32(0) + tail)), "launch spec has no program (argv is empty)");
  EXPECT_EQ(ErrorOf(WithBody(U32(1) + Str("") + tail)),
            "launch spec has no program (argv is empty)");
  EXPECT_EQ(ErrorOf(WithBody(U32(1000) + Str("prog") + tail)),
            "launch spec announces 1000 argv entries, more than it holds");
  EXPECT_EQ(ErrorOf(WithBody(U32(2) + Str("prog") + U32(3) + "ab")),
            "launch spec is truncated in argv[1]");
  EXPECT_EQ(ErrorOf(WithBody(U32(1) + Str("prog") + U32(0) + Str("") + Str("") + "\x01")),
            "launch spec is truncated at the length of stderr path");
  EXPECT_EQ(
      ErrorOf(WithBody(U32(1) + U32(4) + std::string("pr\0g", 4) + std::string(1, '\0') + tail)),
      "argv[0] of the launch spec holds a NUL byte");
  EXPECT_EQ(ErrorOf(WithBody(U32(1) + U32(4) + "progX" + tail)),
            "argv[0] of the launch spec does not end with NUL");
  EXPECT_EQ(ErrorOf(WithBody(U32(1) + Str("prog") + U32(0) + Str("") + Str("") + Str(""))),
            "launch spec is truncated at the length of stdin path");
  EXPECT_EQ(ErrorOf(WithBody(U32(1) + Str("prog") + U32(1) + Str("NOEQUALS") + Str("") + Str("") +
                             Str("") + Str(""))),
            "environment[0] of the launch spec is not KEY=VALUE");
  EXPECT_EQ(ErrorOf(WithBody(U32(1) + Str("prog") + U32(1) + Str("=value") + Str("") + Str("") +
                             Str("") + Str(""))),
            "environment[0] of the launch spec is not KEY=VALUE");
  EXPECT_EQ(ErrorOf(WithBody(U32(1) + Str("prog") + tail + "x")),
            "launch spec has 1 bytes after its last field");
}

TEST(LaunchSpecTest, ReportsRoundTripAndMalformedOnesAreRefused) {
  unsigned char buffer[wire::kReportHeaderBytes + wire::kMaxDetailBytes];
  const char detail[] = "/usr/bin:/bin";
  size_t size = wire::WriteReport(buffer, wire::kStageResolve, 2, detail, std::strlen(detail));
  wire::Report report;
  char error[128];
  ASSERT_TRUE(wire::ParseReport(buffer, size, &report, error, sizeof(error))) << error;
  EXPECT_EQ(report.stage, wire::kStageResolve);
  EXPECT_EQ(report.err, 2u);
  EXPECT_EQ(std::string(report.detail, report.detail_size), detail);
  EXPECT_FALSE(wire::ParseReport(buffer, size - 1, &report, error, sizeof(error)));
  EXPECT_STREQ(error, "launcher report announces a detail of 13 bytes, but 12 follow");
  EXPECT_FALSE(wire::ParseReport(buffer, 3, &report, error, sizeof(error)));
  EXPECT_STREQ(error, "launcher report of 3 bytes is malformed");
}

}  // namespace
}  // namespace tessera
