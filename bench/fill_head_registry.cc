// fill_head_registry: fills a running head's node registry with N synthetic nodes through the
// head's own path, the tessera.v1.HeadNodes RegisterNode and Heartbeat calls that node agents make
// (src/node/head_link.cc), with the cluster token sent as they send it (x-tessera-token).
//
//   fill_head_registry --state-dir DIR --nodes N [--devices-per-node K] [--heartbeat-ms 1000]
//                      [--agent-address HOST:PORT]
//
// Reads the head's address (<state>/head.address) and the token (<state>/token) from the state
// folder, registers fill-0001 ... fill-N (CPU and memory, K simulated H100 GPUs on one NVSwitch
// in two NUMA groups, zone and rack labels), prints "registered N nodes" on stdout once the head
// has taken every one, then heartbeats all of them every --heartbeat-ms, each heartbeat with one
// reading of each GPU so the hardware views have figures, until SIGTERM or SIGINT. A node the
// head answers known=false for (it restarted, or declared the node dead) is said on stderr and
// registered again. On exit it prints a one-line summary on stderr. Exit status: 0 after a
// signal; 1 when the head refuses a call for good (anything but UNAVAILABLE or DEADLINE_EXCEEDED)
// or has not taken every node within 2 minutes; 2 for a bad command line.
//
// The nodes' agent address is a dead loopback port (127.0.0.1:1; --agent-address names another,
// e.g. a listener that counts connections) and they serve no HTTP: the head calls an agent only
// to prepare, commit or cancel bundles, which nobody asks of these nodes, and lists only agents
// with an HTTP address in its Prometheus targets.
//
// One thread drives every call through one gRPC completion queue, at most kInFlight at once, so
// 1,000 nodes cost one process, one connection and one thread. Not a library: no thread-safety
// to speak of beyond the signal flag.
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "grpcpp/completion_queue.h"
#include "grpcpp/support/async_unary_call.h"
#include "hardware/node_label_keys.h"
#include "resources/quantity.h"
#include "rpc/auth.h"
#include "rpc/channel.h"
#include "rpc/token.h"
#include "tessera/v1/head.grpc.pb.h"

namespace tessera {
namespace {

constexpr int kInFlight = 64;                              // calls outstanding at once
constexpr absl::Duration kCallTimeout = absl::Seconds(2);  // as HeadLink's
constexpr int64_t kGiB = int64_t{1} << 30;

std::atomic<bool> stop_requested{false};
extern "C" void OnSignal(int) { stop_requested.store(true); }

struct Options {
  std::string state_dir;
  int nodes = 0;
  int devices = 8;
  int heartbeat_ms = 1000;
  std::string agent_address = "127.0.0.1:1";  // nothing listens there
};

[[noreturn]] void Usage(const std::string& problem) {
  std::cerr << "fill_head_registry: " << problem << "\n"
            << "usage: fill_head_registry --state-dir DIR --nodes N [--devices-per-node K] "
               "[--heartbeat-ms MS] [--agent-address HOST:PORT]\n";
  std::exit(2);
}

Options ParseArgs(int argc, char** argv) {
  Options options;
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    if (i + 1 >= argc) Usage(absl::StrCat(flag, ": needs a value"));
    const std::string value = argv[++i];
    auto number = [&](int min) {
      int n = 0;
      if (!absl::SimpleAtoi(value, &n) || n < min) {
        Usage(absl::StrCat(flag, ": \"", value, "\" is not a whole number of at least ", min));
      }
      return n;
    };
    if (flag == "--state-dir") {
      options.state_dir = value;
    } else if (flag == "--nodes") {
      options.nodes = number(1);
    } else if (flag == "--devices-per-node") {
      options.devices = number(0);
    } else if (flag == "--heartbeat-ms") {
      options.heartbeat_ms = number(1);
    } else if (flag == "--agent-address") {
      options.agent_address = value;
    } else {
      Usage(absl::StrCat("unknown flag ", flag));
    }
  }
  if (options.state_dir.empty()) Usage("--state-dir is required");
  if (options.nodes == 0) Usage("--nodes is required");
  if (options.nodes > 99999) Usage("--nodes: at most 99999");
  return options;
}

std::string FirstLine(const std::string& path) {
  std::FILE* file = std::fopen(path.c_str(), "r");
  if (file == nullptr) return "";
  char buffer[512] = {};
  const bool read = std::fgets(buffer, sizeof(buffer), file) != nullptr;
  std::fclose(file);
  std::string line = read ? buffer : "";
  while (!line.empty() && (line.back() == '\n' || line.back() == '\r' || line.back() == ' ')) {
    line.pop_back();
  }
  return line;
}

// What one synthetic node registers: an H100 host as the fixtures describe one.
v1::NodeDescription Describe(int n, const Options& options, const std::string& incarnation) {
  const int devices = options.devices;
  v1::NodeDescription node;
  const std::string id = absl::StrFormat("fill-%04d", n);
  node.set_node_id(id);
  node.set_address(options.agent_address);
  node.set_incarnation(incarnation);
  auto& raw = *node.mutable_resources()->mutable_raw();
  raw["CPU"] = 224 * Quantity::kScale;
  raw["memory"] = 2048 * kGiB * Quantity::kScale;
  auto& labels = *node.mutable_labels();
  labels[std::string(labels::kNodeId)] = id;
  labels[std::string(labels::kAvailabilityZone)] =
      absl::StrCat("zone-", std::string(1, static_cast<char>('a' + n % 4)));
  labels[std::string(labels::kNodeGroup)] = absl::StrFormat("rack-%02d", (n - 1) / 40);
  labels["pool"] = "fill";
  if (devices > 0) {
    raw["GPU"] = int64_t{devices} * Quantity::kScale;
    raw["accelerator_type:H100"] = Quantity::kScale;
    labels[std::string(labels::kAcceleratorType)] = "H100";
    v1::DeviceTopology* gpus = node.add_devices();
    gpus->set_resource("GPU");
    gpus->set_count(devices);
    for (int i = 0; i < devices; ++i) {
      gpus->add_numa_node(i < (devices + 1) / 2 ? 0 : 1);
      gpus->add_nearest_nic(absl::StrCat("ibp", i));
      for (int j = i + 1; j < devices; ++j) {
        v1::DeviceLink* link = gpus->add_links();
        link->set_a(i);
        link->set_b(j);
        link->set_kind("nvswitch");
        link->set_lanes(18);
        link->set_gigabytes_per_second(450.0);
      }
    }
  }
  return node;
}

// One reading of GPU `index` of node `n` at `now_ms`: a slow wave per device, every figure set.
void Sample(int n, int index, int64_t now_ms, v1::DeviceSample* out) {
  const double wave = std::sin(static_cast<double>(now_ms) / 20000.0 + 0.7 * n + 1.3 * index);
  const double util = index < 2 ? 0.7 + 0.25 * wave : 0.05 + 0.04 * wave;
  out->set_resource("GPU");
  out->set_index(index);
  out->set_time_ms(now_ms);
  out->set_utilization(util);
  out->set_sm_activity(util * 0.9);
  out->set_tensor_activity(util * 0.6);
  out->set_memory_bandwidth(util * 0.5);
  out->set_memory_total_bytes(80 * kGiB);
  out->set_memory_used_bytes(static_cast<uint64_t>((0.05 + 0.85 * util) * 80 * kGiB));
  out->set_power_watts(120 + 560 * util);
  out->set_temperature_celsius(33 + 40 * util);
}

struct Node {
  v1::RegisterNodeRequest registration;
  bool registered = false;
  bool busy = false;  // a call is in flight
  int64_t epoch_seen = 0;
};

// One outstanding call; its address is the completion queue's tag.
struct Call {
  int node = 0;
  bool heartbeat = false;
  grpc::ClientContext context;
  grpc::Status status;
  v1::RegisterNodeResponse registered;
  v1::HeartbeatResponse beat;
  std::unique_ptr<grpc::ClientAsyncResponseReader<v1::RegisterNodeResponse>> register_reader;
  std::unique_ptr<grpc::ClientAsyncResponseReader<v1::HeartbeatResponse>> heartbeat_reader;
};

int Run(const Options& options) {
  const std::string address = FirstLine(options.state_dir + "/head.address");
  if (address.empty()) {
    std::cerr << "fill_head_registry: no head address in " << options.state_dir
              << "/head.address (is the head running?)\n";
    return 1;
  }
  auto token = rpc::ReadTokenFile(options.state_dir + "/token");
  if (!token.ok()) {
    std::cerr << "fill_head_registry: " << token.status().message() << "\n";
    return 1;
  }
  const std::string incarnation =
      absl::StrCat("fill-", ::getpid(), "-", absl::ToUnixMillis(absl::Now()));
  std::vector<Node> nodes(options.nodes + 1);  // by number, from 1
  for (int n = 1; n <= options.nodes; ++n) {
    *nodes[n].registration.mutable_node() = Describe(n, options, incarnation);
  }
  std::unique_ptr<v1::HeadNodes::Stub> stub =
      v1::HeadNodes::NewStub(rpc::MakeChannel(address, *token));
  grpc::CompletionQueue queue;

  std::deque<int> to_register;
  for (int n = 1; n <= options.nodes; ++n) to_register.push_back(n);
  std::deque<int> to_beat;
  std::vector<int> register_later;  // refused for now (the head busy or not up): next round
  int in_flight = 0;
  int registered = 0;
  bool announced = false;
  int64_t beats_ok = 0, beats_failed = 0, forgotten = 0, rounds = 0, late_rounds = 0;
  const absl::Duration period = absl::Milliseconds(options.heartbeat_ms);
  absl::Time next_round = absl::Now() + period;
  const absl::Time registering_since = absl::Now();

  auto start = [&](int n, bool heartbeat) {
    auto* call = new Call();
    call->node = n;
    call->heartbeat = heartbeat;
    rpc::ConfigureClientContext(&call->context, kCallTimeout);
    nodes[n].busy = true;
    ++in_flight;
    if (!heartbeat) {
      call->register_reader =
          stub->AsyncRegisterNode(&call->context, nodes[n].registration, &queue);
      call->register_reader->Finish(&call->registered, &call->status, call);
      return;
    }
    v1::HeartbeatRequest request;
    request.set_node_id(nodes[n].registration.node().node_id());
    request.set_incarnation(incarnation);
    request.set_bundles_epoch_seen(nodes[n].epoch_seen);
    const int64_t now_ms = absl::ToUnixMillis(absl::Now());
    for (int i = 0; i < options.devices; ++i) Sample(n, i, now_ms, request.add_device_samples());
    call->heartbeat_reader = stub->AsyncHeartbeat(&call->context, request, &queue);
    call->heartbeat_reader->Finish(&call->beat, &call->status, call);
  };

  // What one finished call means; false when the run must stop (a refusal no retry mends).
  auto finish = [&](Call* call) {
    Node& node = nodes[call->node];
    node.busy = false;
    --in_flight;
    const std::string& id = node.registration.node().node_id();
    const grpc::StatusCode code = call->status.error_code();
    const bool transient =
        code == grpc::StatusCode::UNAVAILABLE || code == grpc::StatusCode::DEADLINE_EXCEEDED;
    if (!call->heartbeat) {
      if (call->status.ok()) {
        node.registered = true;
        node.epoch_seen = call->registered.bundles_epoch();
        ++registered;
        const int64_t dead_after = call->registered.dead_after_ms();
        if (registered == 1 && dead_after > 0 && options.heartbeat_ms * 2 > dead_after) {
          std::cerr << "fill_head_registry: --heartbeat-ms " << options.heartbeat_ms
                    << " is more than half the head's node timeout (" << dead_after
                    << " ms): nodes may be declared dead\n";
        }
        return true;
      }
      if (!transient) {
        std::cerr << "fill_head_registry: the head refused " << id << ": "
                  << call->status.error_message() << "\n";
        return false;
      }
      register_later.push_back(call->node);
      return true;
    }
    if (!call->status.ok()) {
      ++beats_failed;
      if (!transient) {
        std::cerr << "fill_head_registry: heartbeat of " << id
                  << " refused: " << call->status.error_message() << "\n";
        return false;
      }
      return true;  // the next round is the next try, as for an agent
    }
    if (!call->beat.known()) {
      // The head restarted, or declared the node dead (then its events say why).
      ++forgotten;
      std::cerr << "fill_head_registry: the head does not know " << id
                << " any more; registering it again\n";
      node.registered = false;
      --registered;
      to_register.push_back(call->node);
      return true;
    }
    ++beats_ok;
    node.epoch_seen = std::max(node.epoch_seen, call->beat.bundles_epoch());
    return true;
  };

  signal(SIGTERM, OnSignal);
  signal(SIGINT, OnSignal);
  int exit_code = 0;
  while (!stop_requested.load()) {
    while (in_flight < kInFlight && (!to_register.empty() || !to_beat.empty())) {
      std::deque<int>& from = !to_register.empty() ? to_register : to_beat;
      const int n = from.front();
      from.pop_front();
      if (nodes[n].busy) continue;
      start(n, /*heartbeat=*/&from == &to_beat);
    }
    if (!announced && registered == options.nodes) {
      announced = true;
      std::cout << "registered " << options.nodes << " nodes" << std::endl;
    }
    if (!announced && absl::Now() - registering_since > absl::Minutes(2)) {
      std::cerr << "fill_head_registry: only " << registered << " of " << options.nodes
                << " nodes registered within 2 minutes\n";
      exit_code = 1;
      break;
    }
    const absl::Time now = absl::Now();
    if (now >= next_round) {
      ++rounds;
      if (!to_beat.empty()) {
        ++late_rounds;  // the last round is not all sent yet: it goes on instead of a new one
      } else {
        // Nodes whose last call has not come back yet skip this round, as an agent's would.
        for (int n = 1; n <= options.nodes; ++n) {
          if (nodes[n].registered && !nodes[n].busy) to_beat.push_back(n);
        }
      }
      to_register.insert(to_register.end(), register_later.begin(), register_later.end());
      register_later.clear();
      next_round += period;
      if (next_round < now) next_round = now + period;  // fell behind: no burst of rounds
      continue;
    }
    void* tag = nullptr;
    bool ok = false;
    const absl::Time wake = std::min(next_round, now + absl::Milliseconds(100));
    const auto got = queue.AsyncNext(&tag, &ok, absl::ToChronoTime(wake));
    if (got == grpc::CompletionQueue::SHUTDOWN) break;
    if (got != grpc::CompletionQueue::GOT_EVENT) continue;
    std::unique_ptr<Call> call(static_cast<Call*>(tag));
    if (!finish(call.get())) {
      exit_code = 1;
      break;
    }
  }
  // The calls still out end within their deadline; nothing is deregistered (agents do not
  // either: the head finds the nodes silent and declares them dead after its node timeout).
  queue.Shutdown();
  void* tag = nullptr;
  bool ok = false;
  while (queue.Next(&tag, &ok)) delete static_cast<Call*>(tag);
  std::cerr << "fill_head_registry: stopped; " << registered << " of " << options.nodes
            << " nodes registered, " << rounds << " heartbeat rounds (" << late_rounds
            << " late: the previous round still being sent), " << beats_ok
            << " heartbeats answered, " << beats_failed << " failed, " << forgotten
            << " nodes the head forgot\n";
  return exit_code;
}

}  // namespace
}  // namespace tessera

int main(int argc, char** argv) { return tessera::Run(tessera::ParseArgs(argc, argv)); }
