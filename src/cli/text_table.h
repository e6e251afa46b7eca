// TextTable: left-aligned columns for terminal output, sized to the widest cell.
// Not thread-safe; a value built and printed by one caller.
#pragma once

#include <string>
#include <vector>

namespace tessera::cli {

class TextTable {
 public:
  explicit TextTable(std::vector<std::string> header) : header_(std::move(header)) {}

  void AddRow(std::vector<std::string> cells) { rows_.push_back(std::move(cells)); }
  bool empty() const { return rows_.empty(); }

  // Each line indented by `indent` spaces; columns separated by two spaces; no trailing blanks.
  std::string Render(int indent = 2) const;

 private:
  std::vector<std::string> header_;
  std::vector<std::vector<std::string>> rows_;
};

}  // namespace tessera::cli
