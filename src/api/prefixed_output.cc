#include "api/prefixed_output.h"

namespace tessera::api {

std::string PrefixedLines::Add(std::string_view chunk) {
  std::string out;
  size_t start = 0;
  while (start < chunk.size()) {
    const size_t end = chunk.find('\n', start);
    if (end == std::string_view::npos) {
      partial_.append(chunk.substr(start));
      break;
    }
    out += prefix_;
    out += partial_;
    out.append(chunk.substr(start, end + 1 - start));
    partial_.clear();
    start = end + 1;
  }
  return out;
}

std::string PrefixedLines::Flush() {
  if (partial_.empty()) return "";
  std::string out = prefix_ + partial_ + "\n";
  partial_.clear();
  return out;
}

}  // namespace tessera::api
