#include "labels/fallback.h"

#include <gtest/gtest.h>

namespace tessera {
namespace {

LabelSelector S(std::string_view cli) { return *ParseLabelSelector(cli); }

std::string YamlError(std::string_view text) {
  auto list = FallbackList::ParseYaml(text);
  EXPECT_FALSE(list.ok()) << text;
  return list.ok() ? "" : std::string(list.status().message());
}

TEST(FallbackListTest, FirstMatchFollowsOrder) {
  const FallbackList list = FallbackList::FromSelectors(
      {S("tessera.io/accelerator-type=H100"), S("tessera.io/accelerator-type=in(A100,L4)"), S("")});
  ASSERT_EQ(list.options().size(), 3u);
  EXPECT_EQ(list.FirstMatch({{"tessera.io/accelerator-type", "H100"}}), 0u);
  EXPECT_EQ(list.FirstMatch({{"tessera.io/accelerator-type", "L4"}}), 1u);
  EXPECT_EQ(list.FirstMatch({{"zone", "a"}}), 2u);  // the empty selector matches anything
  const FallbackList strict = FallbackList::FromSelectors({S("a=x"), S("a=y")});
  EXPECT_EQ(strict.FirstMatch({{"a", "y"}}), 1u);
  EXPECT_EQ(strict.FirstMatch({{"a", "z"}}), std::nullopt);
  EXPECT_EQ(FallbackList().FirstMatch({}), std::nullopt);
}

TEST(FallbackListTest, ParsesYamlAndJsonInOrder) {
  auto yaml = FallbackList::ParseYaml(
      "- label_selector: {tessera.io/accelerator-type: H100}\n"
      "- label_selector:\n"
      "    tessera.io/accelerator-type: \"in(A100,L4)\"\n"
      "    zone: \"!us-b\"\n");
  ASSERT_TRUE(yaml.ok()) << yaml.status();
  EXPECT_EQ(*yaml,
            FallbackList::FromSelectors({S("tessera.io/accelerator-type=H100"),
                                         S("tessera.io/accelerator-type=in(A100,L4),zone=!us-b")}));
  auto json = FallbackList::ParseYaml(
      R"json([{"label_selector": {"gpu": "exists()"}}, {"label_selector": {}}])json");
  ASSERT_TRUE(json.ok()) << json.status();
  EXPECT_EQ(*json, FallbackList::FromSelectors({S("gpu=exists()"), S("")}));
  auto empty = FallbackList::ParseYaml("");
  ASSERT_TRUE(empty.ok());
  EXPECT_TRUE(empty->empty());
}

TEST(FallbackListTest, WithPrimaryPutsThePrimaryFirst) {
  const FallbackList fallbacks = FallbackList::FromSelectors({S("a=y")});
  const FallbackList list = FallbackList::WithPrimary(S("a=x"), fallbacks);
  EXPECT_EQ(list, FallbackList::FromSelectors({S("a=x"), S("a=y")}));
  EXPECT_EQ(list.FirstMatch({{"a", "x"}}), 0u);
}

TEST(FallbackListTest, ToStringRoundTripsThroughParseYaml) {
  const FallbackList list = FallbackList::FromSelectors(
      {S("gpu=exists(),!in(a,b),zone=x"), S(""), S("tessera.io/node-id=!n1")});
  EXPECT_EQ(list.ToString(),
            "[{\"label_selector\": {\"gpu\": \"!in(a,b),exists()\", \"zone\": \"x\"}}, "
            "{\"label_selector\": {}}, "
            "{\"label_selector\": {\"tessera.io/node-id\": \"!n1\"}}]");
  auto parsed = FallbackList::ParseYaml(list.ToString());
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(*parsed, list);
  EXPECT_EQ(FallbackList().ToString(), "[]");
}

TEST(FallbackListTest, EntryErrorsNameIndexAndLine) {
  EXPECT_EQ(YamlError("- label_selector: {a: x}\n- just text\n"),
            "fallback entry 1 (line 2): must be a map {label_selector: {...}}");
  EXPECT_EQ(YamlError("- label_selector: {a: x}\n- {}\n"),
            "fallback entry 1 (line 2): is empty; expected {label_selector: {...}}");
  EXPECT_EQ(YamlError("- label_selector: {a: x}\n  bundles: []\n"),
            "fallback entry 0 (line 1): unknown key \"bundles\"; the only key allowed is "
            "label_selector");
  EXPECT_EQ(YamlError("- label_selector: [a]\n"),
            "fallback entry 0 (line 1): label_selector: line 1: expected a map of strings, not a "
            "list");
  EXPECT_EQ(YamlError("- label_selector: {gpu: \"in(a\"}\n"),
            "fallback entry 0 (line 1): label selector: key \"gpu\": \"in(a\": column 3: '(' is "
            "never closed");
  EXPECT_EQ(YamlError("- label_selector: {a: x}\n  label_selector: {b: y}\n"),
            "fallback entry 0 (line 1): label_selector is given twice");
  EXPECT_EQ(YamlError("label_selector: {a: x}\n"),
            "fallback list YAML: expected a list of {label_selector: {...}} entries");
  EXPECT_EQ(YamlError("[{label_selector: {a: x}"),
            "fallback list YAML: line 1: end of map flow not found");
}

}  // namespace
}  // namespace tessera
