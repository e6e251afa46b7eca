// An actor pool: N stateful workers (actors), each holding a running total in its own process,
// with work spread round-robin over them; calls to one actor run in order, the actors in parallel.
// At the end each actor reports how many items it handled and its worker id.
//
//   tessera up examples/clusters/small.yaml
//   build/examples/cpp/actor_pool 4 1000
//   tessera down
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "tessera/tessera.h"

class Summer {
 public:
  // Adds the square of x to this actor's total; returns the total so far.
  long Add(int x) {
    ++items_;
    return total_ += static_cast<long>(x) * x;
  }
  std::string Report() const {
    return std::to_string(items_) + " items, total " + std::to_string(total_) + ", worker " +
           tessera::GetRuntimeContext().worker_id;
  }

 private:
  long total_ = 0;
  long items_ = 0;
};
std::unique_ptr<Summer> MakeSummer() { return std::make_unique<Summer>(); }
TESSERA_ACTOR(MakeSummer);
TESSERA_ACTOR_METHOD(&Summer::Add);
TESSERA_ACTOR_METHOD(&Summer::Report);

int main(int argc, char** argv) {
  // First thing in main: in a worker process (an actor) this serves calls and never returns.
  if (absl::Status s = tessera::Init(); !s.ok()) {
    std::fprintf(stderr, "actor_pool: %s\n", std::string(s.message()).c_str());
    return 1;
  }
  const int actors = argc > 1 ? std::atoi(argv[1]) : 4;
  const int items = argc > 2 ? std::atoi(argv[2]) : 1000;
  if (actors < 1 || items < 0) {
    std::fprintf(stderr, "usage: actor_pool [ACTORS>=1] [ITEMS>=0]\n");
    return 2;
  }
  std::vector<tessera::ActorHandle<Summer>> pool;
  for (int i = 0; i < actors; ++i) pool.push_back(tessera::Actor(MakeSummer).Remote());

  std::vector<tessera::ObjectRef<long>> last(actors);
  for (int i = 0; i < items; ++i) last[i % actors] = pool[i % actors].Task(&Summer::Add).Remote(i);

  long sum = 0;
  int code = 0;
  for (int a = 0; a < actors; ++a) {
    if (a < items) {  // the last call of each actor carries its final total (calls run in order)
      auto total = tessera::Get(last[a]);
      if (!total.ok()) {
        std::fprintf(stderr, "actor %d: %s\n", a, std::string(total.status().message()).c_str());
        code = 1;
        continue;
      }
      sum += *total;
    }
    auto report = tessera::Get(pool[a].Task(&Summer::Report).Remote());
    std::printf("actor %d: %s\n", a,
                report.ok() ? report->c_str() : std::string(report.status().message()).c_str());
  }
  long expected = 0;
  for (long i = 0; i < items; ++i) expected += i * i;
  std::printf("sum of squares of 0..%d: %ld (expected %ld)\n", items - 1, sum, expected);
  for (auto& actor : pool) (void)tessera::Kill(actor);
  tessera::Shutdown();
  return code != 0 || sum != expected ? 1 : 0;
}
