// A worker's output as its driver prints it when asked to name the worker (InitOptions::
// prefix_worker_output, as Ray's "(pid=..., node=...) " lines): whole lines, each with the
// prefix; a partial line waits for its end (or for Flush, when the stream ends).
//
// Threading: one per stream, used from one thread. Cost: one copy of each line.
#pragma once

#include <string>
#include <string_view>

namespace tessera::api {

class PrefixedLines {
 public:
  explicit PrefixedLines(std::string prefix) : prefix_(std::move(prefix)) {}

  // The whole lines `chunk` completes, each prefixed and ending in '\n'; "" when none.
  std::string Add(std::string_view chunk);
  // What is left of a last line without its end, prefixed and ended; "" when nothing is left.
  std::string Flush();

 private:
  std::string prefix_;
  std::string partial_;
};

}  // namespace tessera::api
