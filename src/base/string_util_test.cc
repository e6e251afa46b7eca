#include "base/string_util.h"

#include <gtest/gtest.h>

namespace tessera {
namespace {

TEST(ConstantTimeEqualsTest, CompareIsExact) {
  EXPECT_TRUE(ConstantTimeEquals("abc", "abc"));
  EXPECT_FALSE(ConstantTimeEquals("abc", "abd"));
  EXPECT_FALSE(ConstantTimeEquals("abc", "abcd"));
  EXPECT_FALSE(ConstantTimeEquals("", "a"));
  EXPECT_TRUE(ConstantTimeEquals("", ""));
}

TEST(TrimTest, RemovesSurroundingWhitespaceOnly) {
  EXPECT_EQ(Trim("  a b \t\n"), "a b");
  EXPECT_EQ(Trim(""), "");
  EXPECT_EQ(Trim("   "), "");
}

TEST(SplitOutsideParenthesesTest, KeepsCommasInsideParentheses) {
  auto pieces = SplitOutsideParentheses("a=in(x,y),b=!z", ',');
  ASSERT_TRUE(pieces.ok()) << pieces.status();
  ASSERT_EQ(pieces->size(), 2u);
  EXPECT_EQ((*pieces)[0].text, "a=in(x,y)");
  EXPECT_EQ((*pieces)[0].column, 0u);
  EXPECT_EQ((*pieces)[1].text, "b=!z");
  EXPECT_EQ((*pieces)[1].column, 10u);
}

TEST(SplitOutsideParenthesesTest, EmptyInputIsOneEmptyPiece) {
  auto pieces = SplitOutsideParentheses("", ',');
  ASSERT_TRUE(pieces.ok());
  ASSERT_EQ(pieces->size(), 1u);
  EXPECT_EQ((*pieces)[0].text, "");
}

TEST(SplitOutsideParenthesesTest, UnbalancedParenthesesNameTheColumn) {
  auto unclosed = SplitOutsideParentheses("a=in(x,y", ',');
  ASSERT_FALSE(unclosed.ok());
  EXPECT_EQ(unclosed.status().message(), "column 5: '(' is never closed");
  auto stray = SplitOutsideParentheses("a=x)", ',');
  ASSERT_FALSE(stray.ok());
  EXPECT_EQ(stray.status().message(), "column 4: ')' without a matching '('");
}

TEST(ParseBoolTest, AcceptsEveryDocumentedSpelling) {
  for (const char* t : {"1", "true", "TRUE", "yes", "On", " on "}) {
    auto v = ParseBool(t);
    ASSERT_TRUE(v.ok()) << t;
    EXPECT_TRUE(*v) << t;
  }
  for (const char* f : {"0", "false", "No", "OFF"}) {
    auto v = ParseBool(f);
    ASSERT_TRUE(v.ok()) << f;
    EXPECT_FALSE(*v) << f;
  }
}

TEST(ParseBoolTest, RejectsAnythingElse) {
  for (const char* bad : {"", "2", "y", "enabled", "truee"}) {
    EXPECT_FALSE(ParseBool(bad).ok()) << bad;
  }
}

TEST(QuoteTest, EscapesControlCharacters) { EXPECT_EQ(Quote("a\nb"), "\"a\\nb\""); }

}  // namespace
}  // namespace tessera
