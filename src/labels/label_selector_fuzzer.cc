// libFuzzer target: the label, selector and fallback parsers (CLI and YAML forms) never crash on
// any input, and whatever they accept prints to text that parses back to the same value.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#include "labels/fallback.h"
#include "labels/label.h"
#include "labels/label_selector.h"

namespace {

void Fail(const char* what, std::string_view input, const std::string& printed) {
  std::fprintf(stderr, "%s round trip failed: input [%.*s] printed [%s]\n", what,
               static_cast<int>(input.size()), input.data(), printed.c_str());
  std::abort();
}

void CheckSelector(const char* what, std::string_view input, const tessera::LabelSelector& s) {
  const std::string printed = s.ToString();
  auto again = tessera::ParseLabelSelector(printed);
  if (!again.ok() || !(*again == s)) Fail(what, input, printed);
  auto from_map = tessera::ParseLabelSelectorMap(s.ToMap());
  if (!from_map.ok() || !(*from_map == s)) Fail(what, input, printed);
  // Matching must be total; the empty label set satisfies exactly the negative constraints.
  bool all_negative = true;
  for (const tessera::LabelConstraint& c : s.constraints()) {
    all_negative = all_negative && (c.op == tessera::SelectorOperator::kNotIn ||
                                    c.op == tessera::SelectorOperator::kDoesNotExist);
  }
  if (s.Matches(tessera::LabelSet()) != all_negative) Fail(what, input, printed);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > 4096) return 0;  // yaml-cpp is slow on huge inputs; nothing new is found there
  const std::string_view text(reinterpret_cast<const char*>(data), size);

  if (auto s = tessera::ParseLabelSelector(text); s.ok()) CheckSelector("CLI selector", text, *s);
  if (auto s = tessera::ParseLabelSelectorYaml(text); s.ok()) {
    CheckSelector("YAML selector", text, *s);
  }
  if (auto list = tessera::FallbackList::ParseYaml(text); list.ok()) {
    const std::string printed = list->ToString();
    auto again = tessera::FallbackList::ParseYaml(printed);
    if (!again.ok() || !(*again == *list)) Fail("FallbackList", text, printed);
  }
  for (auto origin : {tessera::LabelOrigin::kUser, tessera::LabelOrigin::kSystem}) {
    if (auto labels = tessera::ParseLabels(text, origin); labels.ok()) {
      const std::string printed = tessera::FormatLabels(*labels);
      auto again = tessera::ParseLabels(printed, origin);
      if (!again.ok() || *again != *labels) Fail("ParseLabels", text, printed);
    }
    if (auto labels = tessera::ParseLabelsYaml(text, origin); labels.ok()) {
      if (!tessera::ValidateLabels(*labels, origin).ok()) Fail("ParseLabelsYaml", text, "");
    }
  }
  return 0;
}
