// The smallest program of one's own on Tessera: one task and one actor on the cluster that
// `tessera up` brought up, built outside Tessera's tree against the installed package
// (examples/consumer/README.md). Exits 0 when both answered as expected.
//
//   tessera up examples/clusters/small.yaml
//   ./consumer
//   tessera down
#include <cstdio>
#include <memory>
#include <string>

#include "tessera/tessera.h"

int Square(int x) { return x * x; }
TESSERA_REMOTE(Square);

class Counter {
 public:
  int Add(int n) { return total_ += n; }

 private:
  int total_ = 0;
};
std::unique_ptr<Counter> MakeCounter() { return std::make_unique<Counter>(); }
TESSERA_ACTOR(MakeCounter);
TESSERA_ACTOR_METHOD(&Counter::Add);

int main() {
  // First thing in main: in a worker process this serves tasks and never returns.
  if (absl::Status s = tessera::Init(); !s.ok()) {
    std::fprintf(stderr, "consumer: %s\n", std::string(s.message()).c_str());
    return 1;
  }
  // What a task asks for is a typed value: amounts by name, a strategy, label selectors.
  absl::StatusOr<int> square =
      tessera::Get(tessera::Task(Square).Resources({{"CPU", 1}}).Spread().Remote(7));

  auto counter = tessera::Actor(MakeCounter).Remote();
  (void)counter.Task(&Counter::Add).Remote(2);
  absl::StatusOr<int> total = tessera::Get(counter.Task(&Counter::Add).Remote(3));
  (void)tessera::Kill(counter);
  tessera::Shutdown();

  if (!square.ok() || !total.ok()) {
    std::fprintf(stderr, "consumer: %s\n",
                 std::string((!square.ok() ? square.status() : total.status()).message()).c_str());
    return 1;
  }
  std::printf("task: Square(7) = %d\nactor: 2 + 3 = %d\n", *square, *total);
  return *square == 49 && *total == 5 ? 0 : 1;
}
