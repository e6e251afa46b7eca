// ChooseDeviceSet cost per call on real node shapes: 8-GPU NVSwitch (H100) and DGX-1 cube-mesh
// nodes for k = 1, 2, 4, 8, and a 32-NeuronCore trn1 node for k = 8, 16. Each case runs with all
// devices free and with one device busy (the busy case cannot return early for k == count).
// Prints one line per case: ns per call of DeviceSetChooser::Choose on a node prepared once (what
// the scheduler keeps per node) and of the one-shot ChooseDeviceSet (prepares on every call).
// Run: device_set_choice_bench [min_seconds_per_case].
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "scheduling/device_set_choice.h"

namespace tessera {
namespace {

DeviceLink Link(int a, int b, LinkKind kind, int lanes, double gbps) {
  DeviceLink l;
  l.a = a;
  l.b = b;
  l.kind = kind;
  l.lanes = lanes;
  l.gigabytes_per_second = gbps;
  l.bandwidth_class = ClassifyBandwidth(gbps);
  return l;
}

DeviceTopology H100() {
  DeviceTopology t;
  t.count = 8;
  t.numa_node = {0, 0, 0, 0, 1, 1, 1, 1};
  for (int i = 0; i < 8; ++i) t.nearest_nic.push_back("mlx5_" + std::to_string(i));
  for (int a = 0; a < 8; ++a) {
    for (int b = a + 1; b < 8; ++b) t.links.push_back(Link(a, b, LinkKind::kNvSwitch, 18, 450));
  }
  return t;
}

DeviceTopology CubeMesh() {
  DeviceTopology t;
  t.count = 8;
  t.numa_node = {0, 0, 0, 0, 1, 1, 1, 1};
  for (int i = 0; i < 8; ++i) t.nearest_nic.push_back("mlx5_" + std::to_string(i / 2));
  const int nv[8][8] = {{0, 1, 1, 2, 2, 0, 0, 0}, {1, 0, 2, 1, 0, 2, 0, 0},
                        {1, 2, 0, 2, 0, 0, 1, 0}, {2, 1, 2, 0, 0, 0, 0, 1},
                        {2, 0, 0, 0, 0, 1, 1, 2}, {0, 2, 0, 0, 1, 0, 2, 1},
                        {0, 0, 1, 0, 1, 2, 0, 2}, {0, 0, 0, 1, 2, 1, 2, 0}};
  for (int a = 0; a < 8; ++a) {
    for (int b = a + 1; b < 8; ++b) {
      if (nv[a][b] > 0) t.links.push_back(Link(a, b, LinkKind::kNvLink, nv[a][b], 25 * nv[a][b]));
    }
  }
  return t;
}

DeviceTopology Trn1() {
  DeviceTopology t;
  t.count = 32;
  for (int core = 0; core < 32; ++core) t.numa_node.push_back(core / 16);
  t.nearest_nic.assign(32, "");
  for (int chip = 0; chip < 16; ++chip) {
    t.links.push_back(Link(2 * chip, 2 * chip + 1, LinkKind::kNeuronLink, 1, 820));
    const int next = (chip + 1) % 16;
    for (int a : {2 * chip, 2 * chip + 1}) {
      for (int b : {2 * next, 2 * next + 1})
        t.links.push_back(Link(a, b, LinkKind::kNeuronLink, 1, 48));
    }
  }
  return t;
}

volatile size_t sink = 0;  // keeps the calls from being optimized away

// Nanoseconds per call of `call`, repeated for at least min_seconds.
template <typename F>
double NanosPerCall(F call, double min_seconds) {
  using Clock = std::chrono::steady_clock;
  int64_t calls = 0;
  int64_t batch = 16;
  const Clock::time_point start = Clock::now();
  double elapsed = 0;
  while (elapsed < min_seconds) {
    for (int64_t i = 0; i < batch; ++i) sink = sink + call();
    calls += batch;
    batch *= 2;
    elapsed = std::chrono::duration<double>(Clock::now() - start).count();
  }
  return elapsed * 1e9 / calls;
}

void Run(const char* node, const DeviceTopology& t, int busy, int k, double min_seconds) {
  std::vector<bool> free(t.count, true);
  if (busy >= 0) free[busy] = false;
  const DeviceSetChooser chooser(t);
  const double prepared = NanosPerCall([&] { return chooser.Choose(free, k).size(); }, min_seconds);
  const double one_shot =
      NanosPerCall([&] { return ChooseDeviceSet(t, free, k).size(); }, min_seconds);
  std::string devices;
  for (int d : chooser.Choose(free, k)) devices += (devices.empty() ? "" : ",") + std::to_string(d);
  std::printf("%-10s busy=%-3s k=%-3d prepared %9.0f ns/call  one-shot %9.0f ns/call  -> [%s]\n",
              node, busy < 0 ? "-" : std::to_string(busy).c_str(), k, prepared, one_shot,
              devices.c_str());
}

}  // namespace
}  // namespace tessera

int main(int argc, char** argv) {
  using namespace tessera;
  const double min_seconds = argc > 1 ? std::atof(argv[1]) : 0.5;
  const DeviceTopology h100 = H100(), cube = CubeMesh(), trn1 = Trn1();
  for (int busy : {-1, 3}) {
    for (int k : {1, 2, 4, 8}) {
      Run("h100-8", h100, busy, k, min_seconds);
      Run("cube-mesh", cube, busy, k, min_seconds);
    }
  }
  for (int busy : {-1, 5}) {
    for (int k : {8, 16}) Run("trn1-32", trn1, busy, k, min_seconds);
  }
  return 0;
}
