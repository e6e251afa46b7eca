#include "cli/text_table.h"

#include <gtest/gtest.h>

namespace tessera::cli {
namespace {

TEST(TextTableTest, AlignsColumnsToWidestCell) {
  TextTable table({"ID", "TYPE"});
  table.AddRow({"0", "H100"});
  table.AddRow({"10", "A"});
  EXPECT_EQ(table.Render(1), " ID  TYPE\n 0   H100\n 10  A\n");
}

TEST(TextTableTest, DropsTrailingBlanks) {
  TextTable table({"A", "B"});
  table.AddRow({"xyz", ""});
  EXPECT_EQ(table.Render(0), "A    B\nxyz\n");
}

}  // namespace
}  // namespace tessera::cli
