#include "labels/label_selector.h"

#include <gtest/gtest.h>

namespace tessera {
namespace {

LabelSelector S(std::string_view cli) {
  auto s = ParseLabelSelector(cli);
  EXPECT_TRUE(s.ok()) << s.status();
  return s.value_or(LabelSelector());
}

std::string CliError(std::string_view cli) {
  auto s = ParseLabelSelector(cli);
  EXPECT_FALSE(s.ok()) << cli << " parsed as " << s->ToString();
  return s.ok() ? "" : std::string(s.status().message());
}

const LabelSet kH100 = {{"tessera.io/accelerator-type", "H100"}, {"zone", "a"}, {"spot", ""}};
const LabelSet kBare = {{"zone", "b"}};

TEST(LabelSelectorMatchTest, EqualsNeedsThePresentValue) {
  EXPECT_TRUE(S("zone=a").Matches(kH100));
  EXPECT_FALSE(S("zone=a").Matches(kBare));
  EXPECT_FALSE(S("rack=a").Matches(kH100));  // absent key never equals
}

TEST(LabelSelectorMatchTest, NotEqualsMatchesAbsentKeys) {
  EXPECT_FALSE(S("zone=!a").Matches(kH100));
  EXPECT_TRUE(S("zone=!a").Matches(kBare));
  EXPECT_TRUE(S("rack=!a").Matches(kH100));
}

TEST(LabelSelectorMatchTest, InAndNotIn) {
  EXPECT_TRUE(S("zone=in(a,b)").Matches(kH100));
  EXPECT_TRUE(S("zone=in(a,b)").Matches(kBare));
  EXPECT_FALSE(S("zone=in(c,d)").Matches(kH100));
  EXPECT_FALSE(S("rack=in(a,b)").Matches(kH100));
  EXPECT_FALSE(S("zone=!in(a,b)").Matches(kH100));
  EXPECT_TRUE(S("zone=!in(c,d)").Matches(kH100));
  EXPECT_TRUE(S("rack=!in(a,b)").Matches(kH100));
}

TEST(LabelSelectorMatchTest, ExistsCountsEmptyValues) {
  EXPECT_TRUE(S("spot=exists()").Matches(kH100));  // value is ""
  EXPECT_FALSE(S("spot=exists()").Matches(kBare));
  EXPECT_FALSE(S("spot=!exists()").Matches(kH100));
  EXPECT_TRUE(S("spot=!exists()").Matches(kBare));
}

TEST(LabelSelectorMatchTest, KeysAndExpressionsAreAnded) {
  EXPECT_TRUE(S("zone=exists(),!in(b,c)").Matches(kH100));
  EXPECT_FALSE(S("zone=exists(),!in(b,c)").Matches(kBare));
  EXPECT_TRUE(S("tessera.io/accelerator-type=H100,zone=a").Matches(kH100));
  EXPECT_FALSE(S("tessera.io/accelerator-type=H100,zone=b").Matches(kH100));
  EXPECT_TRUE(S("").Matches(kH100));
  EXPECT_TRUE(S("").Matches(LabelSet()));
  EXPECT_TRUE(S("").empty());
}

TEST(ParseLabelSelectorTest, BuildsCanonicalConstraints) {
  const LabelSelector s = S(" gpu = in( b , a , b ) , zone=!x, gpu=exists() ");
  ASSERT_EQ(s.constraints().size(), 3u);
  EXPECT_EQ(s.constraints()[0], (LabelConstraint{"gpu", SelectorOperator::kIn, {"a", "b"}}));
  EXPECT_EQ(s.constraints()[1], (LabelConstraint{"gpu", SelectorOperator::kExists, {}}));
  EXPECT_EQ(s.constraints()[2], (LabelConstraint{"zone", SelectorOperator::kNotIn, {"x"}}));
  EXPECT_EQ(s.ToString(), "gpu=in(a,b),exists(),zone=!x");
  // A piece without '=' continues the previous key.
  EXPECT_EQ(S("gpu=exists(),!in(a,b)"), S("gpu=!in(b,a),gpu=exists()"));
  EXPECT_EQ(S("zone=in(a)"), S("zone=a"));
  EXPECT_EQ(S("zone=a,zone=a").constraints().size(), 1u);  // identical constraints deduplicated
}

TEST(ParseLabelSelectorTest, ToStringRoundTrips) {
  for (std::string_view cli :
       {"", "a=b", "a=!b", "a=in(x,y,z)", "a=!in(y,x)", "a=exists()", "a=!exists()",
        "a=exists(),!in(b,c),d", "tessera.io/accelerator-type=in(H100,A100),zone=!us-b",
        "example.com/k=v,k2=!exists()"}) {
    const LabelSelector s = S(cli);
    EXPECT_EQ(S(s.ToString()), s) << cli << " -> " << s.ToString();
    auto from_map = ParseLabelSelectorMap(s.ToMap());
    ASSERT_TRUE(from_map.ok()) << from_map.status();
    EXPECT_EQ(*from_map, s);
  }
}

TEST(ParseLabelSelectorTest, ErrorsSayWhereAndWhy) {
  EXPECT_EQ(CliError("gpu=in(a,b"), "label selector \"gpu=in(a,b\": column 7: '(' is never closed");
  EXPECT_EQ(CliError("gpu=a)"), "label selector \"gpu=a)\": column 6: ')' without a matching '('");
  EXPECT_EQ(CliError("gpu=(a,b)"),
            "label selector \"gpu=(a,b)\": column 5: \"(a,b)\" needs an operator: write in(a,b)");
  EXPECT_EQ(CliError("gpu=!"),
            "label selector \"gpu=!\": column 5: bare '!' for key \"gpu\"; write !value, "
            "!in(a,b) or !exists()");
  EXPECT_EQ(CliError("gpu=in()"),
            "label selector \"gpu=in()\": column 7: in() needs at least one value");
  EXPECT_EQ(CliError("gpu=in( )"),
            "label selector \"gpu=in( )\": column 7: in() needs at least one value");
  EXPECT_EQ(CliError("gpu=in(a,,b)"),
            "label selector \"gpu=in(a,,b)\": column 10: empty value in in(...)");
  EXPECT_EQ(CliError("gpu=exists(a)"),
            "label selector \"gpu=exists(a)\": column 12: exists() takes no values");
  EXPECT_EQ(CliError("gpu=has(a)"),
            "label selector \"gpu=has(a)\": column 5: unknown operator \"has\" (expected a value, "
            "in(...) or exists())");
  EXPECT_EQ(CliError("gpu=in(a)b"),
            "label selector \"gpu=in(a)b\": column 10: unexpected text \"b\" after ')'");
  EXPECT_EQ(CliError("gpu=in((a))"),
            "label selector \"gpu=in((a))\": column 8: nested '(' is not allowed");
  EXPECT_EQ(CliError("gpu="),
            "label selector \"gpu=\": column 5: empty expression for key \"gpu\"");
  EXPECT_EQ(CliError("gpu=a,"),
            "label selector \"gpu=a,\": column 7: empty expression for key "
            "\"gpu\"");
  EXPECT_EQ(CliError("=a"), "label selector \"=a\": column 1: empty key before '='");
  EXPECT_EQ(CliError("in(a)"),
            "label selector \"in(a)\": column 1: \"in(a)\" has no key (expected key=expression)");
  EXPECT_EQ(CliError(",a=b"), "label selector \",a=b\": column 1: empty entry before ','");
  EXPECT_EQ(CliError("a=b,  Bad Key=c"),
            "label selector \"a=b,  Bad Key=c\": column 7: label key \"Bad Key\": name \"Bad "
            "Key\" has an invalid character \" \" (allowed: letters, digits, '-', '_', '.')");
  EXPECT_EQ(CliError("gpu=in(a,b c)"),
            "label selector \"gpu=in(a,b c)\": column 10: label value \"b c\" has an invalid "
            "character \" \" (allowed: letters, digits, '-', '_', '.')");
  EXPECT_EQ(CliError("gpu=a=b"),
            "label selector \"gpu=a=b\": column 5: label value \"a=b\" has an invalid character "
            "\"=\" (allowed: letters, digits, '-', '_', '.')");
}

TEST(LabelSelectorTest, AddConstraintValidates) {
  LabelSelector s;
  ASSERT_TRUE(
      s.AddConstraint({"tessera.io/node-id", SelectorOperator::kNotIn, {"n2", "n1", "n1"}}).ok());
  EXPECT_EQ(s.ToString(), "tessera.io/node-id=!in(n1,n2)");
  EXPECT_EQ(s.AddConstraint({"gpu", SelectorOperator::kIn, {}}).message(),
            "label selector key \"gpu\": in needs at least one value");
  EXPECT_EQ(s.AddConstraint({"gpu", SelectorOperator::kExists, {"a"}}).message(),
            "label selector key \"gpu\": exists takes no values");
  EXPECT_EQ(s.AddConstraint({"gpu", SelectorOperator::kIn, {""}}).message(),
            "label selector key \"gpu\": a selector value may not be empty");
  EXPECT_EQ(s.AddConstraint({"bad key", SelectorOperator::kExists, {}}).message(),
            "label key \"bad key\": name \"bad key\" has an invalid character \" \" (allowed: "
            "letters, digits, '-', '_', '.')");
  EXPECT_EQ(s.constraints().size(), 1u);  // failed adds change nothing
}

TEST(ParseLabelSelectorMapTest, MapFormAndErrors) {
  auto s = ParseLabelSelectorMap({{"gpu", "exists(),!in(a,b)"}, {"zone", "x"}});
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(*s, S("gpu=exists(),!in(a,b),zone=x"));
  auto bad = ParseLabelSelectorMap({{"gpu", "in(a"}});
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().message(),
            "label selector: key \"gpu\": \"in(a\": column 3: '(' is never closed");
  auto bad_value = ParseLabelSelectorMap({{"gpu", "a,(b)"}});
  ASSERT_FALSE(bad_value.ok());
  EXPECT_EQ(
      bad_value.status().message(),
      "label selector: key \"gpu\": \"a,(b)\": column 3: \"(b)\" needs an operator: write in(b)");
  auto bad_key = ParseLabelSelectorMap({{"", "x"}});
  ASSERT_FALSE(bad_key.ok());
  EXPECT_EQ(bad_key.status().message(), "label selector: label key \"\" is empty");
}

TEST(ParseLabelSelectorYamlTest, YamlAndJson) {
  auto yaml = ParseLabelSelectorYaml("gpu: \"in(a,b)\"\nzone: \"!x\"\n");
  ASSERT_TRUE(yaml.ok()) << yaml.status();
  EXPECT_EQ(*yaml, S("gpu=in(a,b),zone=!x"));
  auto json = ParseLabelSelectorYaml(
      R"json({"gpu": "exists(),!in(a,b)", "tessera.io/accelerator-type": "H100"})json");
  ASSERT_TRUE(json.ok()) << json.status();
  EXPECT_EQ(*json, S("gpu=exists(),!in(a,b),tessera.io/accelerator-type=H100"));
  auto empty = ParseLabelSelectorYaml("");
  ASSERT_TRUE(empty.ok());
  EXPECT_TRUE(empty->empty());
}

std::string YamlError(std::string_view text) {
  auto s = ParseLabelSelectorYaml(text);
  EXPECT_FALSE(s.ok()) << text;
  return s.ok() ? "" : std::string(s.status().message());
}

TEST(ParseLabelSelectorYamlTest, ErrorsNameTheLine) {
  EXPECT_EQ(YamlError("zone: a\ngpu: \"in(a\"\n"),
            "label selector YAML: line 2: key \"gpu\": \"in(a\": column 3: '(' is never closed");
  EXPECT_EQ(YamlError("zone: a\ngpu: [a, b]\n"),
            "label selector YAML: line 2: value of \"gpu\" must be a string, not a list");
  EXPECT_EQ(YamlError("zone:\n  x: y\n"),
            "label selector YAML: line 2: value of \"zone\" must be a string, not a map");
  EXPECT_EQ(YamlError("zone: a\nzone: b\n"),
            "label selector YAML: line 2: key \"zone\" is given twice");
  EXPECT_EQ(YamlError("just text"),
            "label selector YAML: line 1: expected a map of strings, not a string");
  EXPECT_EQ(YamlError("[a"), "label selector YAML: line 1: end of sequence flow not found");
}

}  // namespace
}  // namespace tessera
