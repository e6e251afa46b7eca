// Chaos on a real local cluster whose head keeps its state in a real redis-server (issue 12, item
// 8). This binary is a C++ API driver (and, started by the agents, its workers); it runs a 10k-task
// workload, in waves between the faults, while a 2-rank gang (a shell rank program, a job of the
// head) runs. The faults:
//   (a) SIGKILL of a task's worker and of a gang rank's process;
//   (b) SIGSTOP of an agent and SIGCONT after a while: once shorter than the node timeout (the
//       gang's node: nothing may notice) and once longer (the task node a victim runs on: it is
//       declared dead, its work runs again elsewhere, and it comes back);
//   (c) SIGKILL of the head and a restart on the same Redis (its own test: it needs the training
//       jobs' controllers to survive a head restart).
// Checked after each:
//   - nothing lost or doubled: every result arrives once with its value (retries are counted,
//     late results of retried tasks are counted as duplicates and never delivered);
//   - the gang ends as the restart rules say: a killed rank restarts the whole gang within its
//     max_restarts, and it ends SUCCEEDED;
//   - nothing double-booked: at no sampled point (every 200 ms) does a node's usage exceed its
//     total or a device belong to two holders, in the head's view (GetClusterStatus, what `tessera
//     status --json` prints) nor in any agent's own (its latest report, seen through a HeadTap);
//   - the head converges to the truth: within a bounded wait, every node's available equals its
//     total minus what its agent holds, and every agent holds exactly the bundles the head says;
//   - nothing orphaned: once the driver is gone, no leases and no bundles are held anywhere, every
//     node is wholly available, and no process of the cluster is left but the head and the agents.
//
// Each fault hits a known target, so what is asserted never depends on timing: a "victim" task
// records its pid and node and holds its worker until the test releases it (or kills it; a retry
// answers at once), and every rank records its pid per attempt. Waits are bounded and wait for
// states, never for durations. Cost: 5-10 s per test on 2 cores (three agents, three 32 MiB
// stores, a few workers), about a minute more when a lease request of the driver is caught by the
// paused agent (it waits out its deadlines); the sampler runs on its own thread and client.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "client/cluster_client.h"
#include "client/state_folder.h"
#include "head/redis_test_server.h"
#include "integration/cluster_harness.h"
#include "integration/head_tap.h"
#include "tessera/gang.h"
#include "tessera/tessera.h"

namespace tessera::testing {
namespace {

namespace fs = std::filesystem;
namespace v1 = tessera::v1;
using Json = nlohmann::json;

// Nodes whose label pool is `pool`.
LabelSelector Pool(const std::string& pool) {
  return LabelSelector::Of({{"pool", SelectorOperator::kIn, {pool}}}).value();
}

// In a test: fails it (not fatally) with the status when `expr` is not OK.
#define EXPECT_OK(expr)                                       \
  do {                                                        \
    const absl::Status expect_ok_status_ = (expr);            \
    EXPECT_TRUE(expect_ok_status_.ok()) << expect_ok_status_; \
  } while (0)

// A step of checks: named in the output when it begins and in every failure inside its scope.
#define CHECK_STEP(what) \
  SCOPED_TRACE(what);    \
  Step(what)

// Short enough that a node declared dead is quick to see, long enough that a loaded CI machine
// never misses it by accident (heartbeats are a quarter of it).
constexpr absl::Duration kNodeTimeout = absl::Seconds(3);
constexpr absl::Duration kPatience = absl::Seconds(60);
constexpr int64_t kWholeDevice = 10000;  // Quantity::raw() of one device
const std::vector<std::string> kNodes = {"g1", "w1", "w2"};

// ---------------------------------------------------------------------------------------------
// The workload.

std::string VictimFile(const std::string& dir, int64_t x) {
  return absl::StrCat(dir, "/victim-", x);
}
// Where a victim's retry says it ran.
std::string RetryFile(const std::string& dir, int64_t x) { return VictimFile(dir, x) + "-again"; }
std::string VictimRelease(const std::string& dir) { return dir + "/victims-go"; }

bool AwaitFile(const std::string& path, absl::Duration timeout) {
  for (const absl::Time until = absl::Now() + timeout; absl::Now() < until;) {
    if (fs::exists(path)) return true;
    absl::SleepFor(absl::Milliseconds(20));
  }
  return fs::exists(path);
}

void Touch(const std::string& path) { std::ofstream(path) << "go\n"; }

// Writes "<pid> <node>" of this process to `file`, whole or not at all.
void RecordWhereThisRuns(const std::string& file) {
  {
    std::ofstream out(file + ".tmp");
    out << getpid() << " " << GetRuntimeContext().node_id << "\n";
  }
  fs::rename(file + ".tmp", file);
}

// About 1 ms of work answering 2x+1. Given `victim_dir`, its first run records where it runs and
// holds its worker until the victims are released (or its worker is killed); a retry records
// where it runs too and answers at once, like any other task.
int64_t Work(int64_t x, std::string victim_dir) {
  if (!victim_dir.empty()) {
    const std::string file = VictimFile(victim_dir, x);
    if (!fs::exists(file)) {
      RecordWhereThisRuns(file);
      // Bounded, so a broken test cannot hang on it.
      AwaitFile(VictimRelease(victim_dir), absl::Seconds(90));
    } else {
      RecordWhereThisRuns(RetryFile(victim_dir, x));
    }
  }
  absl::SleepFor(absl::Milliseconds(1));
  return 2 * x + 1;
}
TESSERA_REMOTE(Work);

struct Victim {
  int pid = 0;
  std::string node;
};

// Where victim `x` ran first (`retry` false) or again.
absl::StatusOr<Victim> AwaitVictim(const std::string& dir, int64_t x, bool retry = false) {
  const std::string file = retry ? RetryFile(dir, x) : VictimFile(dir, x);
  if (!AwaitFile(file, kPatience)) {
    return absl::DeadlineExceededError(
        absl::StrCat("victim task ", x, retry ? " never ran again" : " never ran"));
  }
  Victim victim;
  std::ifstream in(file);
  if (!(in >> victim.pid >> victim.node)) return absl::InternalError("unreadable " + file);
  return victim;
}

// The tasks, submitted in waves; the victims among them are named by index.
class Workload {
 public:
  explicit Workload(std::string dir) : dir_(std::move(dir)), before_(GetTaskStats()) {}

  // `count` more tasks on the task nodes. `victim` (an index among all tasks) records itself and
  // holds its worker.
  void Submit(int64_t count, std::optional<int64_t> victim = std::nullopt) {
    for (int64_t n = 0; n < count; ++n) {
      const int64_t i = static_cast<int64_t>(refs_.size());
      refs_.push_back(
          Task(Work).LabelSelector(Pool("tasks")).Remote(i, victim == i ? dir_ : std::string()));
    }
  }
  int64_t size() const { return static_cast<int64_t>(refs_.size()); }

  // Every result, once, with its value; then what the counters say happened on the way.
  void ExpectEveryResultOnce(int64_t min_retries) {
    auto values = Get(refs_, absl::Seconds(120));
    ASSERT_TRUE(values.ok()) << values.status();
    ASSERT_EQ(values->size(), refs_.size());
    int64_t wrong = 0;
    for (size_t i = 0; i < values->size(); ++i) {
      if ((*values)[i] != 2 * static_cast<int64_t>(i) + 1) {
        if (++wrong <= 5) ADD_FAILURE() << "task " << i << " answered " << (*values)[i];
      }
    }
    EXPECT_EQ(wrong, 0);
    const TaskStats after = GetTaskStats();
    const int64_t retries = after.retries - before_.retries;
    const int64_t duplicates = after.duplicate_results - before_.duplicate_results;
    std::printf(
        "workload: %zu tasks; retries %lld, duplicate results %lld, workers started %lld, "
        "died %lld\n",
        refs_.size(), static_cast<long long>(retries), static_cast<long long>(duplicates),
        static_cast<long long>(after.workers_started - before_.workers_started),
        static_cast<long long>(after.workers_died - before_.workers_died));
    EXPECT_EQ(after.submitted - before_.submitted, size());
    EXPECT_EQ(after.succeeded - before_.succeeded, size());
    EXPECT_EQ(after.failed - before_.failed, 0);
    EXPECT_GE(retries, min_retries);
    // A late result of a task that was retried is counted, not delivered: only retries make one.
    EXPECT_LE(duplicates, retries);
  }

 private:
  std::string dir_;
  TaskStats before_;
  std::vector<ObjectRef<int64_t>> refs_;
};

// ---------------------------------------------------------------------------------------------
// The gang: 2 ranks of CPU=1,GPU=1 on the gang node, each recording its pid per attempt and
// running until released.

std::string RankFile(const std::string& dir, int rank, int attempt) {
  return absl::StrCat(dir, "/rank-", rank, "-", attempt);
}
std::string GangRelease(const std::string& dir) { return dir + "/gang-go"; }

GangOptions TwoRankGang(const std::string& dir, int max_restarts) {
  GangOptions options;
  options.name = "chaos";
  options.workers = 2;
  options.resources_per_worker = ResourceSet::FromAmounts({{"CPU", 1}, {"GPU", 1}}).value();
  options.label_selectors = {Pool("gang")};
  options.max_restarts = max_restarts;
  options.stop_grace = absl::Milliseconds(500);
  const std::string f = absl::StrCat(dir, "/rank-$RANK-$TORCHELASTIC_RESTART_COUNT");
  options.command = {
      "/bin/sh", "-c",
      absl::StrCat("echo $$ > ", f, ".tmp && mv ", f, ".tmp ", f, "; i=0; while [ ! -e ",
                   GangRelease(dir),
                   " ]; do i=$((i+1)); if [ $i -gt 900 ]; then echo never released; exit 9; fi; "
                   "sleep 0.1; done; echo rank $RANK done")};
  return options;
}

absl::StatusOr<int> AwaitRank(const std::string& dir, int rank, int attempt) {
  const std::string file = RankFile(dir, rank, attempt);
  if (!AwaitFile(file, kPatience)) {
    return absl::DeadlineExceededError(absl::StrCat("rank ", rank, " never ran attempt ", attempt));
  }
  int pid = 0;
  std::ifstream in(file);
  if (!(in >> pid)) return absl::InternalError(absl::StrCat("unreadable ", file));
  return pid;
}

// Polls the gang until `want` holds of its status; the last status either way.
absl::StatusOr<GangStatus> AwaitGang(const Gang& gang,
                                     const std::function<bool(const GangStatus&)>& want) {
  absl::StatusOr<GangStatus> status;
  for (const absl::Time until = absl::Now() + kPatience; absl::Now() < until;) {
    status = gang.Status();
    if (status.ok() && (want(*status) || status->ended())) return status;
    absl::SleepFor(absl::Milliseconds(50));
  }
  return status;
}

// ---------------------------------------------------------------------------------------------
// Views: what the head says (ClusterStatus) and what each agent says it holds (its latest report).

using Raw = std::map<std::string, int64_t>;
// (resource, instance) -> amount held (kWholeDevice for a whole device).
using DeviceUse = std::map<std::pair<std::string, int>, int64_t>;

void Add(const v1::Resources& resources, Raw& sum) {
  for (const auto& [name, raw] : resources.raw()) sum[name] += raw;
}

void AddDevices(const v1::Allocation& allocation, DeviceUse& use) {
  for (const v1::DeviceGrant& grant : allocation.devices()) {
    for (int i = 0; i < grant.instances_size(); ++i) {
      use[{grant.resource(), grant.instances(i)}] +=
          i < grant.amounts_raw_size() ? grant.amounts_raw(i) : kWholeDevice;
    }
  }
}

std::string Show(const Raw& raw) {
  std::vector<std::string> parts;
  for (const auto& [name, value] : raw) parts.push_back(absl::StrCat(name, "=", value));
  return absl::StrJoin(parts, ",");
}

// Resources above the node's total and devices held beyond one whole device, as problems.
void OverTotal(const std::string& who, const Raw& used, const Raw& total, const DeviceUse& devices,
               std::vector<std::string>& problems) {
  for (const auto& [name, amount] : used) {
    const auto it = total.find(name);
    const int64_t limit = it == total.end() ? 0 : it->second;
    if (amount > limit) {
      problems.push_back(absl::StrCat(who, " uses ", name, "=", amount, " of ", limit));
    }
  }
  for (const auto& [device, amount] : devices) {
    if (amount > kWholeDevice) {
      problems.push_back(absl::StrCat(who, " gives ", device.first, " ", device.second,
                                      " to more than one holder (", amount, ")"));
    }
  }
}

bool Alive(const v1::NodeInfo& node) { return node.state() == v1::NODE_STATE_ALIVE; }
bool Live(const v1::PlacementGroupInfo& group) {
  return group.state() != v1::PLACEMENT_GROUP_STATE_REMOVED;
}

// The name the head knows a group by, for a group named either by its id or by its name.
std::string GroupName(const v1::ClusterStatus& status, const std::string& id_or_name) {
  for (const v1::PlacementGroupInfo& group : status.placement_groups()) {
    if (group.id() == id_or_name) return group.name();
  }
  return id_or_name;
}

// "group#index CPU=..,GPU=.. [GPU:0]" of one bundle.
std::string BundleKey(const std::string& group, int index, const v1::Allocation& allocation) {
  std::vector<std::string> devices;
  for (const v1::DeviceGrant& grant : allocation.devices()) {
    devices.push_back(absl::StrCat(grant.resource(), ":", absl::StrJoin(grant.instances(), "+")));
  }
  Raw resources;
  Add(allocation.resources(), resources);
  return absl::StrCat(group, "#", index, " ", Show(resources), " [", absl::StrJoin(devices, " "),
                      "]");
}

// The head's own view: nothing available beyond a node's total, nothing below zero, and the
// bundles of live groups on each node fit it without sharing a device.
std::vector<std::string> HeadViewProblems(const v1::ClusterStatus& status) {
  std::vector<std::string> problems;
  std::map<std::string, Raw> totals;
  for (const v1::NodeInfo& node : status.nodes()) {
    if (!Alive(node)) continue;
    const std::string& id = node.node().node_id();
    Add(node.node().resources(), totals[id]);
    Raw available;
    Add(node.available(), available);
    for (const auto& [name, amount] : available) {
      const int64_t total = totals[id].contains(name) ? totals[id][name] : 0;
      if (amount < 0 || amount > total) {
        problems.push_back(absl::StrCat("the head: node ", id, " has ", name, "=", amount,
                                        " available of ", total));
      }
    }
  }
  std::map<std::string, Raw> bundle_use;
  std::map<std::string, DeviceUse> bundle_devices;
  for (const v1::PlacementGroupInfo& group : status.placement_groups()) {
    if (!Live(group)) continue;
    for (const v1::BundleLocation& bundle : group.bundles()) {
      if (bundle.node_id().empty()) continue;
      Add(bundle.allocation().resources(), bundle_use[bundle.node_id()]);
      AddDevices(bundle.allocation(), bundle_devices[bundle.node_id()]);
    }
  }
  for (const auto& [node, used] : bundle_use) {
    if (!totals.contains(node)) continue;  // a dead node's bundles are being moved
    OverTotal(absl::StrCat("the head's bundles on ", node), used, totals[node],
              bundle_devices[node], problems);
  }
  return problems;
}

// An agent's own view: its leases outside bundles and its bundles fit its node, no device is held
// twice, and a lease inside a bundle it holds uses only that bundle's devices.
std::vector<std::string> AgentViewProblems(const AgentReport& report, const Raw& total) {
  std::vector<std::string> problems;
  Raw used;
  DeviceUse devices;
  std::map<std::pair<std::string, int>, std::set<std::pair<std::string, int>>> bundle_devices;
  for (const v1::HeldBundle& bundle : report.report.bundles()) {
    Add(bundle.allocation().resources(), used);
    AddDevices(bundle.allocation(), devices);
    DeviceUse mine;
    AddDevices(bundle.allocation(), mine);
    for (const auto& [device, amount] : mine) {
      bundle_devices[{bundle.placement_group(), bundle.bundle_index()}].insert(device);
    }
  }
  for (const v1::LeaseInfo& lease : report.report.leases()) {
    if (lease.placement_group().empty()) {
      Add(lease.allocation().resources(), used);
      AddDevices(lease.allocation(), devices);
      continue;
    }
    const auto held = bundle_devices.find({lease.placement_group(), lease.bundle_index()});
    if (held == bundle_devices.end()) continue;  // the report read leases, then bundles
    DeviceUse mine;
    AddDevices(lease.allocation(), mine);
    for (const auto& [device, amount] : mine) {
      if (!held->second.contains(device)) {
        problems.push_back(absl::StrCat("agent ", report.report.node_id(), ": lease ",
                                        lease.lease_id(), " in bundle ", lease.bundle_index(),
                                        " of ", lease.placement_group(), " uses ", device.first,
                                        " ", device.second, ", not its bundle's"));
      }
    }
  }
  OverTotal(absl::StrCat("agent ", report.report.node_id()), used, total, devices, problems);
  return problems;
}

// Reports of every node in `ids` that arrived after `since` (each agent reports every heartbeat).
absl::StatusOr<std::map<std::string, AgentReport>> ReportsSince(const HeadTap& tap,
                                                                const std::vector<std::string>& ids,
                                                                absl::Time since) {
  for (const absl::Time until = absl::Now() + absl::Seconds(10);;) {
    std::map<std::string, AgentReport> reports = tap.Reports();
    std::vector<std::string> stale;
    for (const std::string& id : ids) {
      if (!reports.contains(id) || reports[id].at < since) stale.push_back(id);
    }
    if (stale.empty()) return reports;
    if (absl::Now() >= until) {
      return absl::DeadlineExceededError(
          absl::StrCat("no report since the check began from ", absl::StrJoin(stale, ", ")));
    }
    absl::SleepFor(absl::Milliseconds(50));
  }
}

// Node id -> the bundles held there ("group#index resources [devices]").
using HeldBundles = std::map<std::string, std::set<std::string>>;

// Once: every alive node's agent holds exactly the bundles the head places there, and the head's
// available is the node's total minus what the agent holds (its leases outside bundles and its
// bundles). With `idle`, also: nothing is held anywhere and no group is live. On agreement, the
// bundles held, by node.
absl::StatusOr<HeldBundles> HeadMatchesAgents(client::ClusterClient& client, const HeadTap& tap,
                                              bool idle) {
  const absl::Time since = absl::Now();
  auto status = client.GetClusterStatus();
  if (!status.ok()) return status.status();
  std::vector<std::string> alive;
  for (const v1::NodeInfo& node : status->nodes()) {
    if (Alive(node)) alive.push_back(node.node().node_id());
  }
  auto reports = ReportsSince(tap, alive, since);
  if (!reports.ok()) return reports.status();
  // The head's status again, now that every report is newer than the first: a report the first
  // status had not seen yet has been seen by this one, or the next attempt finds agreement.
  status = client.GetClusterStatus();
  if (!status.ok()) return status.status();

  std::vector<std::string> differences;
  std::map<std::string, std::set<std::string>> head_bundles;
  for (const v1::PlacementGroupInfo& group : status->placement_groups()) {
    if (!Live(group)) continue;
    if (idle) differences.push_back(absl::StrCat("group ", group.name(), " is still live"));
    for (const v1::BundleLocation& bundle : group.bundles()) {
      if (bundle.node_id().empty()) continue;
      head_bundles[bundle.node_id()].insert(
          BundleKey(group.name(), bundle.index(), bundle.allocation()));
    }
  }
  for (const v1::NodeInfo& node : status->nodes()) {
    if (!Alive(node)) continue;
    const std::string& id = node.node().node_id();
    const v1::HeartbeatRequest& report = (*reports)[id].report;
    std::set<std::string> agent_bundles;
    Raw held;
    for (const v1::HeldBundle& bundle : report.bundles()) {
      agent_bundles.insert(BundleKey(GroupName(*status, bundle.placement_group()),
                                     bundle.bundle_index(), bundle.allocation()));
      Add(bundle.allocation().resources(), held);
    }
    for (const v1::LeaseInfo& lease : report.leases()) {
      if (lease.placement_group().empty()) Add(lease.allocation().resources(), held);
    }
    if (agent_bundles != head_bundles[id]) {
      differences.push_back(absl::StrCat("node ", id, ": the agent holds {",
                                         absl::StrJoin(agent_bundles, "; "), "}, the head {",
                                         absl::StrJoin(head_bundles[id], "; "), "}"));
    }
    Raw total;
    Add(node.node().resources(), total);
    Raw available;
    Add(node.available(), available);
    Raw should_be;
    for (const auto& [name, amount] : total) should_be[name] = amount - held[name];
    for (const Raw* more : {&available, &held}) {
      for (const auto& [name, amount] : *more) {
        if (!should_be.contains(name)) should_be[name] = -held[name];
      }
    }
    Raw shown = should_be;
    for (auto& [name, amount] : shown) amount = available.contains(name) ? available[name] : 0;
    if (shown != should_be) {
      differences.push_back(absl::StrCat("node ", id, ": the head shows available ", Show(shown),
                                         ", its total less what the agent holds is ",
                                         Show(should_be), " (holds ", Show(held), ")"));
    }
    if (idle && (report.leases_size() > 0 || report.bundles_size() > 0)) {
      differences.push_back(absl::StrCat("node ", id, ": the agent still holds ",
                                         report.leases_size(), " leases and ",
                                         report.bundles_size(), " bundles"));
    }
  }
  if (differences.empty()) return head_bundles;
  return absl::FailedPreconditionError(absl::StrJoin(differences, "\n"));
}

// Waits (bounded) until HeadMatchesAgents agrees; what it agreed on goes to `held`.
absl::Status AwaitAgreement(TestCluster& cluster, bool idle, HeldBundles* held = nullptr) {
  return cluster.WaitUntil([&]() -> absl::Status {
    auto agreed = HeadMatchesAgents(cluster.client(), *cluster.head_tap(), idle);
    if (agreed.ok() && held != nullptr) *held = *agreed;
    return agreed.status();
  });
}

std::string Show(const HeldBundles& held) {
  std::vector<std::string> parts;
  for (const auto& [node, bundles] : held) {
    parts.push_back(absl::StrCat(node, ": {", absl::StrJoin(bundles, "; "), "}"));
  }
  return absl::StrJoin(parts, ", ");
}

// ---------------------------------------------------------------------------------------------
// The sampler: both views every 200 ms during the run, on its own thread and client.

class InvariantSampler {
 public:
  InvariantSampler(const std::string& state_dir, const HeadTap* tap)
      : state_dir_(state_dir), tap_(tap), thread_([this] { Loop(); }) {}
  ~InvariantSampler() { Stop(); }

  void Stop() {
    stop_ = true;
    if (thread_.joinable()) thread_.join();
  }
  std::vector<std::string> violations() const {
    absl::MutexLock lock(&mu_);
    return violations_;
  }
  int64_t samples() const {
    absl::MutexLock lock(&mu_);
    return samples_;
  }
  // Whether node `id` was ever seen in `state`.
  bool SeenIn(const std::string& id, v1::NodeState state) const {
    absl::MutexLock lock(&mu_);
    return seen_.contains({id, state});
  }

 private:
  void Loop() {
    std::unique_ptr<client::ClusterClient> client;
    while (!stop_) {
      if (client == nullptr) {
        client::ClusterClientOptions options;
        options.state_dir = state_dir_;
        options.head = client::HeadRequirement::kOptional;
        options.call_deadline = absl::Seconds(2);
        options.retry_budget = absl::Milliseconds(500);
        auto connected = client::ClusterClient::Connect(options);
        if (connected.ok()) client = std::move(*connected);
      }
      if (client != nullptr) Sample(*client);
      absl::SleepFor(absl::Milliseconds(200));
    }
  }

  void Sample(client::ClusterClient& client) {
    auto status = client.GetClusterStatus();
    if (!status.ok()) return;  // the head is down: its view is sampled once it is back
    std::vector<std::string> problems = HeadViewProblems(*status);
    std::map<std::string, Raw> totals;
    for (const v1::NodeInfo& node : status->nodes()) {
      Add(node.node().resources(), totals[node.node().node_id()]);
    }
    for (const auto& [id, report] : tap_->Reports()) {
      std::vector<std::string> more = AgentViewProblems(report, totals[id]);
      problems.insert(problems.end(), more.begin(), more.end());
    }
    absl::MutexLock lock(&mu_);
    ++samples_;
    for (const v1::NodeInfo& node : status->nodes()) {
      seen_.insert({node.node().node_id(), node.state()});
    }
    for (std::string& problem : problems) {
      if (violations_.size() < 20) {
        violations_.push_back(absl::StrCat(
            absl::FormatTime("%H:%M:%E3S", absl::Now(), absl::LocalTimeZone()), " ", problem));
      }
    }
  }

  const std::string state_dir_;
  const HeadTap* tap_;
  std::atomic<bool> stop_ = false;
  mutable absl::Mutex mu_;
  std::vector<std::string> violations_ ABSL_GUARDED_BY(mu_);
  int64_t samples_ ABSL_GUARDED_BY(mu_) = 0;
  std::set<std::pair<std::string, v1::NodeState>> seen_ ABSL_GUARDED_BY(mu_);
  std::thread thread_;  // last: starts once the rest is set up
};

// ---------------------------------------------------------------------------------------------
// The cluster: a head on Redis, two task nodes and a gang node with 2 simulated GPUs, the agents
// reporting through a tap; this binary the driver, leasing through the agent of driver_node().

std::string Cmdline(int pid) {
  std::ifstream in(absl::StrCat("/proc/", pid, "/cmdline"), std::ios::binary);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  for (char& c : text) {
    if (c == '\0') c = ' ';
  }
  return text;
}

int64_t JsonInt(const Json& value) {
  if (value.is_number()) return value.get<int64_t>();
  if (value.is_string()) return std::stoll(value.get<std::string>());
  return 0;
}

class ClusterChaosTest : public ::testing::Test {
 protected:
  // The node whose agent the driver leases through (an agent grants a lease it can take itself).
  virtual std::string driver_node() const { return "w1"; }

  void SetUp() override {
    if (auto found = FindRedisServer(); !found.ok()) {
      GTEST_SKIP() << "no redis-server to keep the head's state in: " << found.status();
    }
    auto redis = RedisTestServer::Create();
    ASSERT_OK(redis.status());
    redis_ = std::move(*redis);
    ClusterOptions options;
    options.node_timeout = absl::FormatDuration(kNodeTimeout);
    options.head_extra_args = {"--redis-address", redis_->address()};
    options.tap_agent_reports = true;
    options.nodes.push_back({.id = "g1", .hardware_yaml = GpuHost(2, 2), .labels = "pool=gang"});
    options.nodes.push_back({.id = "w1", .hardware_yaml = CpuHost(2), .labels = "pool=tasks"});
    options.nodes.push_back({.id = "w2", .hardware_yaml = CpuHost(2), .labels = "pool=tasks"});
    auto cluster = TestCluster::Start(options);
    ASSERT_OK(cluster.status());
    cluster_ = std::move(*cluster);
    dir_ = cluster_->state_dir() + "/chaos";
    ASSERT_TRUE(fs::create_directories(dir_));
    InitOptions init;
    init.state_dir = cluster_->state_dir();
    init.forward_worker_output = false;
    init.agent_address = cluster_->NodeAddress(driver_node());
    ASSERT_OK(Init(init));
    driver_ = true;
    sampler_ = std::make_unique<InvariantSampler>(cluster_->state_dir(), cluster_->head_tap());
    Step("the cluster is up");
  }

  void TearDown() override {
    if (cluster_ != nullptr && !dir_.empty()) {
      Touch(VictimRelease(dir_));
      Touch(GangRelease(dir_));
      for (const std::string& id : kNodes) (void)cluster_->SignalAgent(id, SIGCONT);
    }
    sampler_.reset();
    if (driver_) Shutdown();
    cluster_.reset();
    redis_.reset();
  }

  // What every test checks once its workload and gang are done.
  void ExpectNothingDoubleBookedLostOrOrphaned() {
    {
      CHECK_STEP("nothing double-booked at any sampled point");
      sampler_->Stop();
      std::printf("sampler: %lld samples of both views\n",
                  static_cast<long long>(sampler_->samples()));
      EXPECT_GT(sampler_->samples(), 0);
      EXPECT_THAT(sampler_->violations(), ::testing::IsEmpty());
    }
    {
      CHECK_STEP("the head converges to what the agents hold (the driver still up)");
      EXPECT_OK(AwaitAgreement(*cluster_, /*idle=*/false));
    }
    CHECK_STEP("nothing left once the driver has gone");
    Shutdown();
    driver_ = false;
    EXPECT_OK(AwaitAgreement(*cluster_, /*idle=*/true));
    Step("no process of finished work is left");
    EXPECT_OK(cluster_->WaitUntil([&]() -> absl::Status {
      std::vector<std::string> left;
      std::set<int> servers = {cluster_->head_pid()};
      for (const std::string& id : kNodes) servers.insert(cluster_->NodePid(id));
      for (int pid : cluster_->ProcessesOfThisCluster()) {
        if (!servers.contains(pid)) left.push_back(absl::StrCat(pid, " (", Cmdline(pid), ")"));
      }
      if (left.empty()) return absl::OkStatus();
      return absl::FailedPreconditionError(
          absl::StrCat("processes of finished work left: ", absl::StrJoin(left, "; ")));
    }));
    // What `tessera status --json` shows: every node wholly available.
    const CliResult status = cluster_->Cli({"status", "--json"});
    ASSERT_EQ(status.exit_code, 0) << Describe(status);
    Json doc = Json::parse(status.out, nullptr, /*allow_exceptions=*/false);
    ASSERT_TRUE(doc.is_object() && doc["nodes"].is_array()) << status.out;
    EXPECT_EQ(doc["nodes"].size(), kNodes.size()) << status.out;
    for (Json& node : doc["nodes"]) {
      const std::string id = node["node"]["node_id"].dump();
      Json& total = node["node"]["resources"];
      Json& available = node["available"];
      ASSERT_TRUE(total.is_object() && !total.empty()) << node.dump();
      for (const auto& [name, amount] : total.items()) {
        EXPECT_EQ(available.contains(name) ? JsonInt(available[name]) : 0, JsonInt(amount))
            << "node " << id << " " << name << " in `tessera status --json`";
      }
    }
  }

  // Says in the test's output which step begins, and when (for a CI log; nothing waits on it).
  void Step(const std::string& what) {
    std::printf("[chaos +%.1fs] %s\n", absl::ToDoubleSeconds(absl::Now() - began_), what.c_str());
    std::fflush(stdout);
  }

  absl::Time began_ = absl::Now();
  std::unique_ptr<RedisTestServer> redis_;
  std::unique_ptr<TestCluster> cluster_;
  std::string dir_;
  bool driver_ = false;
  std::unique_ptr<InvariantSampler> sampler_;
};

// The driver leases through the gang's node (whose agent places the tasks through the head: they
// do not fit there), so the two task nodes are alike and the one paused past the node timeout,
// whichever a victim runs on, is never the agent the driver leases through.
class WorkerAndAgentChaosTest : public ClusterChaosTest {
 protected:
  std::string driver_node() const override { return "g1"; }
};

TEST_F(WorkerAndAgentChaosTest, KilledWorkersAndPausedAgentsDuringTenThousandTasksAndAGang) {
  auto gang = StartGang(TwoRankGang(dir_, /*max_restarts=*/2));
  ASSERT_OK(gang.status());
  auto rank1 = AwaitRank(dir_, 1, 0);
  ASSERT_OK(rank1.status());
  ASSERT_OK(AwaitRank(dir_, 0, 0).status());
  Workload work(dir_);

  Step("a task's worker is SIGKILLed");
  // (a) A task's worker is SIGKILLed (as the OOM killer would): its task runs again.
  work.Submit(2000, /*victim=*/1000);
  auto worker = AwaitVictim(dir_, 1000);
  ASSERT_OK(worker.status());
  ASSERT_EQ(kill(worker->pid, SIGKILL), 0);

  Step("a rank is SIGKILLed");
  // (a) A rank's process is SIGKILLed: the whole gang restarts (restart 1 of 2), every rank anew.
  work.Submit(2000);
  ASSERT_EQ(kill(*rank1, SIGKILL), 0);
  ASSERT_OK(AwaitRank(dir_, 0, 1).status());
  ASSERT_OK(AwaitRank(dir_, 1, 1).status());
  auto restarted = AwaitGang(*gang, [](const GangStatus& s) {
    return s.state == GangState::kRunning && s.restart_count == 1;
  });
  ASSERT_OK(restarted.status());
  EXPECT_EQ(restarted->state, GangState::kRunning) << restarted->message;
  EXPECT_EQ(restarted->restart_count, 1);
  {
    CHECK_STEP("while the gang runs, every agent holds what the head says");
    HeldBundles held;
    EXPECT_OK(AwaitAgreement(*cluster_, /*idle=*/false, &held));
    std::printf("held: %s\n", Show(held).c_str());
    EXPECT_EQ(held["g1"].size(), 2u) << "the gang's two bundles";
  }

  Step("the gang's agent is paused briefly");
  // (b) The gang's agent is paused for a third of the node timeout: nobody may notice.
  work.Submit(2000);
  ASSERT_OK(cluster_->SignalAgent("g1", SIGSTOP));
  absl::SleepFor(kNodeTimeout / 3);
  ASSERT_OK(cluster_->SignalAgent("g1", SIGCONT));

  Step("a task node's agent is paused past the node timeout");
  // (b) A task node's agent is paused past the node timeout, with a victim task and more work in
  // flight there: it is declared dead (its work runs again elsewhere), then comes back.
  work.Submit(2000, /*victim=*/7000);
  auto stranded = AwaitVictim(dir_, 7000);
  ASSERT_OK(stranded.status());
  const std::string paused = stranded->node;
  const std::string other = paused == "w1" ? "w2" : "w1";
  ASSERT_THAT(paused, ::testing::AnyOf("w1", "w2"));
  ASSERT_OK(cluster_->SignalAgent(paused, SIGSTOP));
  work.Submit(2000);
  ASSERT_OK(cluster_->WaitNodes({paused}, v1::NODE_STATE_DEAD));
  Step(paused + " is declared dead");
  // The driver hears of the death (it asks the head now and then) and runs the victim again on
  // the task node that is alive.
  auto again = AwaitVictim(dir_, 7000, /*retry=*/true);
  ASSERT_OK(again.status());
  EXPECT_EQ(again->node, other);
  Step("the stranded victim ran again; " + paused + " resumes");
  ASSERT_OK(cluster_->SignalAgent(paused, SIGCONT));
  ASSERT_OK(cluster_->WaitNodes({paused}, v1::NODE_STATE_ALIVE));
  // The stranded victim's first run now ends too: its late result must not count twice.
  Step("the victims are released");
  Touch(VictimRelease(dir_));
  // The stranded victim's worker, given up on by the driver, does not linger once its agent is
  // back (nobody watches it any more).
  EXPECT_OK(cluster_->WaitUntil([&]() -> absl::Status {
    if (!client::ProcessAlive(stranded->pid)) return absl::OkStatus();
    return absl::FailedPreconditionError(absl::StrCat(
        "the stranded victim's worker ", stranded->pid, " on ", paused, " still runs"));
  }));

  {
    CHECK_STEP("every task result once, with its value");
    ASSERT_EQ(work.size(), 10000);
    // The killed worker's task and the stranded one ran again, at least.
    work.ExpectEveryResultOnce(/*min_retries=*/2);
  }
  {
    CHECK_STEP("the gang restarted for the killed rank only, and succeeds");
    Touch(GangRelease(dir_));
    auto done = gang->Wait(kPatience);
    ASSERT_OK(done.status());
    EXPECT_EQ(done->state, GangState::kSucceeded) << done->message;
    EXPECT_EQ(done->restart_count, 1) << done->message;
    EXPECT_FALSE(fs::exists(RankFile(dir_, 0, 2))) << "the short pause restarted the gang";
    EXPECT_FALSE(sampler_->SeenIn("g1", v1::NODE_STATE_DEAD))
        << "a pause shorter than the node timeout got g1 declared dead";
  }
  ExpectNothingDoubleBookedLostOrOrphaned();
}

// The driver leases through w1, which grants the tasks' leases itself while the head is down. The
// gang's part needs running jobs to survive a head restart (the restarted head takes their
// controllers over); the tasks' part and the closing checks stand alone.
using HeadRestartChaosTest = ClusterChaosTest;

TEST_F(HeadRestartChaosTest, HeadKilledAndRestartedOnRedisDuringTenThousandTasksAndAGang) {
  auto gang = StartGang(TwoRankGang(dir_, /*max_restarts=*/1));
  ASSERT_OK(gang.status());
  auto rank0 = AwaitRank(dir_, 0, 0);
  ASSERT_OK(rank0.status());
  auto rank1 = AwaitRank(dir_, 1, 0);
  ASSERT_OK(rank1.status());
  auto running =
      AwaitGang(*gang, [](const GangStatus& s) { return s.state == GangState::kRunning; });
  ASSERT_OK(running.status());
  ASSERT_EQ(running->state, GangState::kRunning) << running->message;
  Workload work(dir_);

  // A victim holds the workload open across the restart (it is released afterwards, not killed).
  work.Submit(3000, /*victim=*/1500);
  ASSERT_OK(AwaitVictim(dir_, 1500).status());

  Step("the head is SIGKILLed and restarted");
  // (c) The head is SIGKILLed; more work is submitted while it is down; it restarts on the same
  // Redis and every agent registers again.
  ASSERT_OK(cluster_->KillHead());
  work.Submit(3000);
  // Every agent has found the head gone (a heartbeat it sent since could not reach it).
  ASSERT_OK(ReportsSince(*cluster_->head_tap(), kNodes, absl::Now()).status());
  ASSERT_OK(cluster_->StartHead());
  ASSERT_OK(cluster_->WaitNodes(kNodes, v1::NODE_STATE_ALIVE));
  work.Submit(4000);
  Touch(VictimRelease(dir_));
  {
    CHECK_STEP("every task result once, with its value, across the head restart");
    ASSERT_EQ(work.size(), 10000);
    work.ExpectEveryResultOnce(/*min_retries=*/0);
  }
  {
    CHECK_STEP("the agents kept their bundles: they hold what the restarted head says");
    HeldBundles held;
    EXPECT_OK(AwaitAgreement(*cluster_, /*idle=*/false, &held));
    std::printf("held: %s\n", Show(held).c_str());
    EXPECT_EQ(held["g1"].size(), 2u) << "the gang's two bundles";
  }
  {
    CHECK_STEP("the gang outlives the head restart, restarts for a killed rank, and succeeds");
    auto after = gang->Status();
    EXPECT_OK(after.status());
    const bool kept =
        after.ok() && after->state == GangState::kRunning && after->restart_count == 0;
    std::ostringstream seen;  // the state in its word (operator<< of tessera/gang.h)
    if (after.ok()) {
      seen << after->state << " (restarts " << after->restart_count << "): " << after->message;
    } else {
      seen << after.status();
    }
    EXPECT_TRUE(kept) << seen.str();
    EXPECT_EQ(kill(*rank0, 0), 0) << "rank 0 of the first attempt did not outlive the head";
    EXPECT_EQ(kill(*rank1, 0), 0) << "rank 1 of the first attempt did not outlive the head";
    if (kept) {
      ASSERT_EQ(kill(*rank0, SIGKILL), 0);
      EXPECT_OK(AwaitRank(dir_, 0, 1).status());
      EXPECT_OK(AwaitRank(dir_, 1, 1).status());
      auto restarted = AwaitGang(*gang, [](const GangStatus& s) {
        return s.state == GangState::kRunning && s.restart_count == 1;
      });
      EXPECT_OK(restarted.status());
      if (restarted.ok()) {
        EXPECT_EQ(restarted->restart_count, 1) << restarted->message;
      }
    }
    Touch(GangRelease(dir_));
    auto done = gang->Wait(kPatience);
    EXPECT_OK(done.status());
    if (done.ok()) {
      EXPECT_EQ(done->state, GangState::kSucceeded) << done->message;
      EXPECT_EQ(done->restart_count, 1) << done->message;
    }
  }
  ExpectNothingDoubleBookedLostOrOrphaned();
}

}  // namespace
}  // namespace tessera::testing
