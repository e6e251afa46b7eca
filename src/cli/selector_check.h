// Which option of a label selector with fallbacks a node's labels satisfy, and, for every option
// that fails, the first constraint that rules the node out — the answer to "why would my task
// not land here?". Thread-safe: pure functions.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "labels/fallback.h"
#include "labels/label.h"

namespace tessera::cli {

struct SelectorCheck {
  std::vector<std::string> options;   // canonical form of each option, primary first
  std::optional<size_t> matched;      // first option the node satisfies
  std::vector<std::string> failures;  // for each option tried before `matched` (or all)
};

SelectorCheck CheckSelector(const FallbackList& selector, const LabelSet& labels);

nlohmann::json SelectorCheckJson(const SelectorCheck& check);
std::string SelectorCheckText(const SelectorCheck& check);

}  // namespace tessera::cli
