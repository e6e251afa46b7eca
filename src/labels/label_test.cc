#include "labels/label.h"

#include <gtest/gtest.h>

namespace tessera {
namespace {

std::string KeyError(std::string_view key) {
  absl::Status s = ValidateLabelKey(key);
  EXPECT_FALSE(s.ok()) << key;
  return std::string(s.message());
}

TEST(ValidateLabelKeyTest, AcceptsKubernetesKeys) {
  for (std::string_view key : {"gpu", "a", "A1", "my_key.v-2", "example.com/zone",
                               "tessera.io/accelerator-type", "a-b.c-d.e/X_y", "x/y"}) {
    EXPECT_TRUE(ValidateLabelKey(key).ok()) << key << ": " << ValidateLabelKey(key);
  }
  EXPECT_TRUE(ValidateLabelKey(std::string(63, 'k')).ok());
  std::string long_prefix;
  for (int i = 0; i < 3; ++i) long_prefix += std::string(63, 'p') + ".";
  long_prefix += std::string(61, 'p');  // 253 characters
  EXPECT_TRUE(ValidateLabelKey(long_prefix + "/k").ok());
  EXPECT_EQ(KeyError(long_prefix + "p/k"),
            "label key \"" + long_prefix + "p/k\" has a prefix longer than 253 characters");
}

TEST(ValidateLabelKeyTest, RejectsEachRuleWithItsReason) {
  EXPECT_EQ(KeyError(""), "label key \"\" is empty");
  EXPECT_EQ(KeyError("a/b/c"), "label key \"a/b/c\" has more than one '/'");
  EXPECT_EQ(KeyError("/name"), "label key \"/name\" has an empty prefix before '/'");
  EXPECT_EQ(KeyError("prefix/"), "label key \"prefix/\": name \"\" is empty");
  EXPECT_EQ(KeyError("-gpu"),
            "label key \"-gpu\": name \"-gpu\" must start and end with a "
            "letter or digit");
  EXPECT_EQ(KeyError("gpu_"),
            "label key \"gpu_\": name \"gpu_\" must start and end with a "
            "letter or digit");
  EXPECT_EQ(KeyError("my key"),
            "label key \"my key\": name \"my key\" has an invalid character "
            "\" \" (allowed: letters, digits, '-', '_', '.')");
  EXPECT_EQ(KeyError(std::string(64, 'k')), "label key \"" + std::string(64, 'k') + "\": name \"" +
                                                std::string(64, 'k') +
                                                "\" is longer than 63 characters");
  EXPECT_EQ(KeyError("Example.com/x"),
            "label key \"Example.com/x\": prefix part \"Example\" has "
            "an invalid character \"E\" (allowed: lowercase letters, "
            "digits, '-')");
  EXPECT_EQ(KeyError("a..b/x"), "label key \"a..b/x\": prefix part \"\" is empty");
  EXPECT_EQ(KeyError("-a.com/x"),
            "label key \"-a.com/x\": prefix part \"-a\" must start and end "
            "with a letter or digit");
  EXPECT_EQ(KeyError("a_b.com/x"),
            "label key \"a_b.com/x\": prefix part \"a_b\" has an invalid "
            "character \"_\" (allowed: lowercase letters, digits, '-')");
}

TEST(ValidateLabelValueTest, EmptyOrOneToken) {
  EXPECT_TRUE(ValidateLabelValue("").ok());
  EXPECT_TRUE(ValidateLabelValue("H100").ok());
  EXPECT_TRUE(ValidateLabelValue("us-central2-b").ok());
  EXPECT_TRUE(ValidateLabelValue("v6e_16.x").ok());
  EXPECT_EQ(ValidateLabelValue("a/b").message(),
            "label value \"a/b\" has an invalid character \"/\" (allowed: letters, digits, '-', "
            "'_', '.')");
  EXPECT_EQ(ValidateLabelValue(".x").message(),
            "label value \".x\" must start and end with a letter or digit");
  EXPECT_EQ(ValidateLabelValue(std::string(64, 'v')).message(),
            "label value \"" + std::string(64, 'v') + "\" is longer than 63 characters");
  EXPECT_EQ(ValidateLabelValue("a\nb").message(),
            "label value \"a\\nb\" has an invalid character \"\\n\" (allowed: letters, digits, "
            "'-', '_', '.')");
}

TEST(ValidateLabelTest, ReservedPrefixOnlyForSystem) {
  EXPECT_TRUE(ValidateLabel("tessera.io/node-id", "abc", LabelOrigin::kSystem).ok());
  EXPECT_EQ(ValidateLabel("tessera.io/node-id", "abc", LabelOrigin::kUser).message(),
            "label key \"tessera.io/node-id\" uses the reserved prefix \"tessera.io/\", which "
            "only Tessera itself may set");
  EXPECT_TRUE(ValidateLabel("my.tessera.io/x", "a", LabelOrigin::kUser).ok());
  EXPECT_TRUE(HasReservedPrefix("tessera.io/x"));
  EXPECT_FALSE(HasReservedPrefix("tessera.iox/x"));
  LabelSet labels = {{"zone", "a"}, {"tessera.io/market-type", "spot"}};
  EXPECT_TRUE(ValidateLabels(labels, LabelOrigin::kSystem).ok());
  EXPECT_FALSE(ValidateLabels(labels, LabelOrigin::kUser).ok());
  labels = {{"zone", "bad value"}};
  EXPECT_EQ(ValidateLabels(labels, LabelOrigin::kSystem).message(),
            "label value \"bad value\" has an invalid character \" \" (allowed: letters, digits, "
            "'-', '_', '.')");
}

LabelSet Parse(std::string_view text, LabelOrigin origin = LabelOrigin::kUser) {
  auto labels = ParseLabels(text, origin);
  EXPECT_TRUE(labels.ok()) << labels.status();
  return labels.value_or(LabelSet());
}

std::string ParseError(std::string_view text, LabelOrigin origin = LabelOrigin::kUser) {
  auto labels = ParseLabels(text, origin);
  EXPECT_FALSE(labels.ok()) << text;
  return labels.ok() ? "" : std::string(labels.status().message());
}

TEST(ParseLabelsTest, ParsesPairsTrimmedAndUnquoted) {
  EXPECT_EQ(Parse("k1=v1,k2=v2"), (LabelSet{{"k1", "v1"}, {"k2", "v2"}}));
  EXPECT_EQ(Parse(" k1 = v1 , k2= "), (LabelSet{{"k1", "v1"}, {"k2", ""}}));
  EXPECT_EQ(Parse("\"zone=a,team=ml\""), (LabelSet{{"team", "ml"}, {"zone", "a"}}));
  EXPECT_EQ(Parse("'zone=a'"), (LabelSet{{"zone", "a"}}));
  EXPECT_TRUE(Parse("").empty());
  EXPECT_TRUE(Parse("  ").empty());
  EXPECT_TRUE(Parse("\"\"").empty());
  EXPECT_EQ(Parse("tessera.io/node-id=abc", LabelOrigin::kSystem),
            (LabelSet{{"tessera.io/node-id", "abc"}}));
}

TEST(ParseLabelsTest, EveryErrorClass) {
  EXPECT_EQ(ParseError("a=1,,b=2"), "labels \"a=1,,b=2\": pair 2 is empty");
  EXPECT_EQ(ParseError("a=1,"), "labels \"a=1,\": pair 2 is empty");
  EXPECT_EQ(ParseError("a"), "label \"a\" has no '=' (expected key=value)");
  EXPECT_EQ(ParseError("a=b=c"), "label \"a=b=c\" has more than one '='");
  EXPECT_EQ(ParseError("a=1,a=2"), "label key \"a\" is given twice");
  EXPECT_EQ(ParseError("=v"), "label key \"\" is empty");
  EXPECT_EQ(ParseError("tessera.io/node-id=x"),
            "label key \"tessera.io/node-id\" uses the reserved prefix \"tessera.io/\", which "
            "only Tessera itself may set");
  EXPECT_EQ(ParseError("zone=a b"),
            "label value \"a b\" has an invalid character \" \" (allowed: letters, digits, '-', "
            "'_', '.')");
}

TEST(ParseLabelsTest, FormatRoundTrips) {
  const LabelSet labels = Parse("zone=us-b,team=ml,empty=");
  EXPECT_EQ(FormatLabels(labels), "empty=,team=ml,zone=us-b");
  EXPECT_EQ(Parse(FormatLabels(labels)), labels);
  EXPECT_EQ(FormatLabels(LabelSet()), "");
}

TEST(ParseLabelsYamlTest, FlatMapInYamlOrJson) {
  auto yaml =
      ParseLabelsYaml("zone: us-b\nteam: \"ml\"\nempty: \"\"\ncount: 4\n", LabelOrigin::kUser);
  ASSERT_TRUE(yaml.ok()) << yaml.status();
  EXPECT_EQ(*yaml, (LabelSet{{"count", "4"}, {"empty", ""}, {"team", "ml"}, {"zone", "us-b"}}));
  auto json = ParseLabelsYaml(R"({"zone": "us-b", "team": "ml"})", LabelOrigin::kUser);
  ASSERT_TRUE(json.ok()) << json.status();
  EXPECT_EQ(*json, (LabelSet{{"team", "ml"}, {"zone", "us-b"}}));
  auto empty = ParseLabelsYaml("", LabelOrigin::kUser);
  ASSERT_TRUE(empty.ok());
  EXPECT_TRUE(empty->empty());
}

std::string YamlError(std::string_view text, LabelOrigin origin = LabelOrigin::kUser) {
  auto labels = ParseLabelsYaml(text, origin);
  EXPECT_FALSE(labels.ok()) << text;
  return labels.ok() ? "" : std::string(labels.status().message());
}

TEST(ParseLabelsYamlTest, ErrorsNameTheLine) {
  EXPECT_EQ(YamlError("zone: a\nteam:\n  nested: x\n"),
            "labels YAML: line 3: value of \"team\" must be a string, not a map");
  EXPECT_EQ(YamlError("zone: [a, b]\n"),
            "labels YAML: line 1: value of \"zone\" must be a string, not a list");
  EXPECT_EQ(YamlError("zone: a\nteam:\n"),
            "labels YAML: line 2: value of \"team\" is null; write \"\" for an empty string");
  EXPECT_EQ(YamlError("zone: a\nzone: b\n"), "labels YAML: line 2: key \"zone\" is given twice");
  EXPECT_EQ(YamlError("- a\n- b\n"), "labels YAML: line 1: expected a map of strings, not a list");
  EXPECT_EQ(YamlError("zone: a\ntessera.io/node-id: x\n"),
            "labels YAML: line 2: label key \"tessera.io/node-id\" uses the reserved prefix "
            "\"tessera.io/\", which only Tessera itself may set");
  EXPECT_EQ(YamlError("{zone: a"), "labels YAML: line 1: end of map flow not found");
  EXPECT_EQ(YamlError("bad key: x"),
            "labels YAML: line 1: label key \"bad key\": name \"bad key\" has an invalid "
            "character \" \" (allowed: letters, digits, '-', '_', '.')");
}

}  // namespace
}  // namespace tessera
