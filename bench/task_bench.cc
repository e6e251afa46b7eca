// Single-client task microbenchmarks (reference/benchmarks.md A2): a no-op task submitted and
// waited for one at a time (sync), and many submitted before waiting for all (async); actor
// calls 1:1 sync and async, and n:n (4 caller threads x 5000 calls round-robin over N actors:
// the reference's 4 tasks are driver threads here, calls from inside tasks are not supported).
// Multi-client: N separate driver processes (this binary again, --multi-client-child; default 4,
// TESSERA_BENCH_CLIENTS) connect to the same cluster, then all at once submit batches of 1000
// async no-op tasks and wait for each batch, for a fixed time; the figure is the tasks of all
// clients over the slowest client's time (connecting is not timed).
// Needs a running cluster: `tessera up examples/clusters/small.yaml` (TESSERA_STATE_DIR names it),
// then `build/bench/task_bench`. This binary is also its own worker. TESSERA_BENCH_TASK_EVENTS=0
// turns the driver's timeline reports off (InitOptions::record_task_events).
#include <benchmark/benchmark.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "tessera/tessera.h"

namespace {

int NoOp(int x) { return x; }
TESSERA_REMOTE(NoOp);

void BM_TaskSync(benchmark::State& state) {
  for (auto _ : state) {
    auto value = tessera::Get(tessera::Task(NoOp).Remote(1));
    if (!value.ok()) state.SkipWithError(std::string(value.status().message()).c_str());
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_TaskSync)->UseRealTime();

void BM_TaskAsync(benchmark::State& state) {
  const int n = static_cast<int>(state.range(0));
  for (auto _ : state) {
    std::vector<tessera::ObjectRef<int>> refs;
    refs.reserve(n);
    for (int i = 0; i < n; ++i) refs.push_back(tessera::Task(NoOp).Remote(i));
    auto values = tessera::Get(refs);
    if (!values.ok()) state.SkipWithError(std::string(values.status().message()).c_str());
  }
  state.SetItemsProcessed(state.iterations() * n);
}
BENCHMARK(BM_TaskAsync)->Arg(1000)->Arg(10000)->UseRealTime()->Unit(benchmark::kMillisecond);

class Echo {
 public:
  int Call(int x) { return x; }
};
std::unique_ptr<Echo> MakeEcho() { return std::make_unique<Echo>(); }
TESSERA_ACTOR(MakeEcho);
TESSERA_ACTOR_METHOD(&Echo::Call);

// One actor for every loop, made (and waited for) before the first timed call.
const tessera::ActorHandle<Echo>& SharedActor() {
  static auto* actor = [] {
    auto* a = new tessera::ActorHandle<Echo>(tessera::Actor(MakeEcho).Remote());
    (void)tessera::Get(a->Task(&Echo::Call).Remote(0));
    return a;
  }();
  return *actor;
}

void BM_ActorCallSync(benchmark::State& state) {
  const auto& actor = SharedActor();
  for (auto _ : state) {
    auto value = tessera::Get(actor.Task(&Echo::Call).Remote(1));
    if (!value.ok()) state.SkipWithError(std::string(value.status().message()).c_str());
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_ActorCallSync)->UseRealTime();

void BM_ActorCallAsync(benchmark::State& state) {
  const auto& actor = SharedActor();
  const int n = static_cast<int>(state.range(0));
  for (auto _ : state) {
    std::vector<tessera::ObjectRef<int>> refs;
    refs.reserve(n);
    for (int i = 0; i < n; ++i) refs.push_back(actor.Task(&Echo::Call).Remote(i));
    auto values = tessera::Get(refs);
    if (!values.ok()) state.SkipWithError(std::string(values.status().message()).c_str());
  }
  state.SetItemsProcessed(state.iterations() * n);
}
BENCHMARK(BM_ActorCallAsync)->Arg(1000)->UseRealTime()->Unit(benchmark::kMillisecond);

void BM_ActorCallsNToN(benchmark::State& state) {
  const int actors = static_cast<int>(state.range(0));
  constexpr int kCallers = 4;
  constexpr int kCallsPerCaller = 5000;
  std::vector<tessera::ActorHandle<Echo>> handles;
  for (int i = 0; i < actors; ++i) handles.push_back(tessera::Actor(MakeEcho).Remote());
  for (auto& h : handles) (void)tessera::Get(h.Task(&Echo::Call).Remote(0));
  for (auto _ : state) {
    std::vector<std::thread> callers;
    for (int c = 0; c < kCallers; ++c) {
      callers.emplace_back([&, c] {
        std::vector<tessera::ObjectRef<int>> refs;
        refs.reserve(kCallsPerCaller);
        for (int i = 0; i < kCallsPerCaller; ++i) {
          refs.push_back(handles[(c + i) % actors].Task(&Echo::Call).Remote(i));
        }
        (void)tessera::Get(refs);
      });
    }
    for (auto& t : callers) t.join();
  }
  for (auto& h : handles) (void)tessera::Kill(h);
  state.SetItemsProcessed(state.iterations() * kCallers * kCallsPerCaller);
}
BENCHMARK(BM_ActorCallsNToN)->Arg(4)->UseRealTime()->Unit(benchmark::kMillisecond);

constexpr char kChildFlag[] = "--multi-client-child";
constexpr int kBatch = 1000;

// One client of the multi-client loop: connected, it says "ready", waits for "go" on stdin, then
// submits batches of kBatch no-op tasks for `seconds`, and answers "<tasks> <seconds taken>".
int RunMultiClientChild(double seconds) {
  if (absl::Status s = tessera::Init(); !s.ok()) {
    std::fprintf(stderr, "task_bench client: %s\n", std::string(s.message()).c_str());
    return 1;
  }
  // Warm: this client's first lease and worker before the clock starts.
  (void)tessera::Get(tessera::Task(NoOp).Remote(0));
  std::printf("ready\n");
  std::fflush(stdout);
  char go[16];
  if (std::fgets(go, sizeof(go), stdin) == nullptr) return 1;
  const auto start = std::chrono::steady_clock::now();
  const auto end = start + std::chrono::duration<double>(seconds);
  long tasks = 0;
  do {
    std::vector<tessera::ObjectRef<int>> refs;
    refs.reserve(kBatch);
    for (int i = 0; i < kBatch; ++i) refs.push_back(tessera::Task(NoOp).Remote(i));
    if (!tessera::Get(refs).ok()) return 1;
    tasks += kBatch;
  } while (std::chrono::steady_clock::now() < end);
  const double taken =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("%ld %.6f\n", tasks, taken);
  std::fflush(stdout);
  tessera::Shutdown();
  return 0;
}

// A child client process with pipes to its stdin and stdout.
struct Child {
  pid_t pid = -1;
  FILE* to = nullptr;
  FILE* from = nullptr;
};

bool SpawnChild(double seconds, Child* child) {
  int in[2], out[2];
  if (::pipe2(in, O_CLOEXEC) != 0) return false;
  if (::pipe2(out, O_CLOEXEC) != 0) return false;
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, in[0], 0);
  posix_spawn_file_actions_adddup2(&actions, out[1], 1);
  const std::string self = "/proc/self/exe";
  const std::string time = std::to_string(seconds);
  char* argv[] = {const_cast<char*>("task_bench"), const_cast<char*>(kChildFlag),
                  const_cast<char*>(time.c_str()), nullptr};
  const int rc = ::posix_spawn(&child->pid, self.c_str(), &actions, nullptr, argv, environ);
  posix_spawn_file_actions_destroy(&actions);
  ::close(in[0]);
  ::close(out[1]);
  child->to = ::fdopen(in[1], "w");
  child->from = ::fdopen(out[0], "r");
  return rc == 0;
}

void BM_MultiClientTasksAsync(benchmark::State& state) {
  const char* env = std::getenv("TESSERA_BENCH_CLIENTS");
  const int clients = env != nullptr ? std::max(1, std::atoi(env)) : 4;
  const double seconds = 3.0;
  for (auto _ : state) {
    std::vector<Child> children(clients);
    bool ok = true;
    for (Child& child : children) ok = SpawnChild(seconds, &child) && ok;
    char line[128];
    for (Child& child : children) {
      ok = ok && std::fgets(line, sizeof(line), child.from) != nullptr &&
           std::strncmp(line, "ready", 5) == 0;
    }
    for (Child& child : children) {
      if (child.to != nullptr) {
        std::fputs("go\n", child.to);
        std::fflush(child.to);
      }
    }
    long tasks = 0;
    double slowest = 0;
    for (Child& child : children) {
      long n = 0;
      double taken = 0;
      if (!ok || std::fgets(line, sizeof(line), child.from) == nullptr ||
          std::sscanf(line, "%ld %lf", &n, &taken) != 2) {
        ok = false;
      }
      tasks += n;
      slowest = std::max(slowest, taken);
    }
    for (Child& child : children) {
      if (child.to != nullptr) std::fclose(child.to);
      if (child.from != nullptr) std::fclose(child.from);
      if (child.pid > 0) {
        if (!ok) ::kill(child.pid, SIGKILL);
        ::waitpid(child.pid, nullptr, 0);
      }
    }
    if (!ok) {
      state.SkipWithError("a client process failed");
      return;
    }
    // Manual time: items_per_second is every client's tasks over the slowest client's time.
    state.SetIterationTime(slowest);
    state.SetItemsProcessed(tasks);
    state.counters["clients"] = clients;
  }
}
BENCHMARK(BM_MultiClientTasksAsync)->UseManualTime()->Iterations(1)->Unit(benchmark::kMillisecond);

}  // namespace

int main(int argc, char** argv) {
  if (argc == 3 && std::strcmp(argv[1], kChildFlag) == 0) {
    return RunMultiClientChild(std::atof(argv[2]));
  }
  // TESSERA_BENCH_TASK_EVENTS=0: no timeline reports (bench/task_events_overhead.sh compares).
  tessera::InitOptions options;
  const char* events = std::getenv("TESSERA_BENCH_TASK_EVENTS");
  options.record_task_events = events == nullptr || std::strcmp(events, "0") != 0;
  if (absl::Status s = tessera::Init(std::move(options)); !s.ok()) {
    std::fprintf(stderr, "task_bench: %s\n", std::string(s.message()).c_str());
    return 1;
  }
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  tessera::Shutdown();
  return 0;
}
