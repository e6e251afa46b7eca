// A parallel map-reduce with Tessera tasks: count the words of many "documents" in parallel
// (map), then add the counts up in a tree of tasks (reduce) whose arguments are the ObjectRefs of
// earlier tasks: each reduce starts when its inputs are ready, without holding a worker.
//
//   tessera up examples/clusters/small.yaml
//   build/examples/cpp/map_reduce 64
//   tessera down
#include <cstdio>
#include <cstdlib>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "tessera/tessera.h"

using Counts = std::map<std::string, int>;

Counts CountWords(std::string text) {
  Counts counts;
  std::istringstream in(text);
  std::string word;
  while (in >> word) ++counts[word];
  return counts;
}
TESSERA_REMOTE(CountWords);

Counts Merge(Counts a, Counts b) {
  for (const auto& [word, n] : b) a[word] += n;
  return a;
}
TESSERA_REMOTE(Merge);

int main(int argc, char** argv) {
  // First thing in main: in a worker process this serves tasks and never returns.
  if (absl::Status s = tessera::Init(); !s.ok()) {
    std::fprintf(stderr, "map_reduce: %s\n", std::string(s.message()).c_str());
    return 1;
  }
  const int documents = argc > 1 ? std::atoi(argv[1]) : 32;
  const std::vector<std::string> words = {"tpu", "gpu", "slice", "lease", "task"};
  std::vector<tessera::ObjectRef<Counts>> level;
  for (int d = 0; d < documents; ++d) {
    std::string text;
    for (int i = 0; i <= d; ++i) text += words[(d + i) % words.size()] + " ";
    level.push_back(tessera::Task(CountWords).Remote(text));
  }
  while (level.size() > 1) {
    std::vector<tessera::ObjectRef<Counts>> next;
    for (size_t i = 0; i + 1 < level.size(); i += 2) {
      next.push_back(tessera::Task(Merge).Remote(level[i], level[i + 1]));
    }
    if (level.size() % 2 == 1) next.push_back(level.back());
    level = std::move(next);
  }
  auto total = tessera::Get(level.front(), absl::Seconds(120));
  if (!total.ok()) {
    std::fprintf(stderr, "map_reduce: %s\n", std::string(total.status().message()).c_str());
    tessera::Shutdown();
    return 1;
  }
  int all = 0;
  for (const auto& [word, n] : *total) {
    std::printf("%-6s %d\n", word.c_str(), n);
    all += n;
  }
  const tessera::TaskStats stats = tessera::GetTaskStats();
  std::printf("%d words in %d documents; %lld tasks on %lld workers, %lld retries\n", all,
              documents, static_cast<long long>(stats.succeeded),
              static_cast<long long>(stats.workers_started), static_cast<long long>(stats.retries));
  tessera::Shutdown();
  return 0;
}
