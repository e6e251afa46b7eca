#include "api/prefixed_output.h"

#include <gtest/gtest.h>

namespace tessera::api {
namespace {

TEST(PrefixedLinesTest, EachWholeLineGetsThePrefix) {
  PrefixedLines lines("(pid=7, node=n1) ");
  EXPECT_EQ(lines.Add("one\ntwo\n"), "(pid=7, node=n1) one\n(pid=7, node=n1) two\n");
  EXPECT_EQ(lines.Flush(), "");
}

TEST(PrefixedLinesTest, APartialLineWaitsForItsEnd) {
  PrefixedLines lines("> ");
  EXPECT_EQ(lines.Add("hel"), "");
  EXPECT_EQ(lines.Add("lo\nwor"), "> hello\n");
  EXPECT_EQ(lines.Add("ld"), "");
  EXPECT_EQ(lines.Flush(), "> world\n");
  EXPECT_EQ(lines.Flush(), "");
}

TEST(PrefixedLinesTest, EmptyLinesAndChunksArePrefixedOrIgnored) {
  PrefixedLines lines("> ");
  EXPECT_EQ(lines.Add(""), "");
  EXPECT_EQ(lines.Add("\n\n"), "> \n> \n");
}

}  // namespace
}  // namespace tessera::api
