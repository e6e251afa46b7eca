#include "integration/cluster_harness.h"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/status_macros.h"
#include "base/string_util.h"
#include "client/state_folder.h"
#include "rpc/state_names.h"

extern char** environ;

namespace tessera::testing {
namespace {

namespace fs = std::filesystem;

std::string ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

void WriteFile(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
}

bool Alive(int pid) { return client::ProcessAlive(pid); }

// Reaps `pid` if it is our child and has exited; true once it is gone.
bool ReapIfDone(int pid) {
  int status = 0;
  const pid_t r = waitpid(pid, &status, WNOHANG);
  if (r == pid || (r < 0 && errno == ECHILD)) return !Alive(pid) || r == pid;
  return false;
}

}  // namespace

std::string TesseraBinary() { return TESSERA_CLI_BINARY; }

std::string Describe(const CliResult& r) {
  return absl::StrCat("exit ", r.exit_code, "\n--- stdout\n", r.out, "--- stderr\n", r.err);
}

std::string CpuHost(int cores) {
  return absl::StrCat("host: {sockets: 1, cores_per_socket: ", cores, ", memory: 16GiB}\n");
}

std::string GpuHost(int cores, int gpus) {
  return absl::StrCat("host: {sockets: 1, cores_per_socket: ", cores,
                      ", memory: 64GiB}\n"
                      "accelerators:\n"
                      "  - {family: nvidia, type: A100, count: ",
                      gpus, ", memory: 40GiB, interconnect: nvlink-pairs}\n");
}

std::string TpuV6eHost(const std::string& slice, int worker, const std::string& topology) {
  return absl::StrCat(
      "host: {sockets: 1, cores_per_socket: 8, memory: 64GiB}\n"
      "accelerators:\n"
      "  - family: tpu\n"
      "    type: TPU-V6E\n"
      "    count: 4\n"
      "    interconnect: ici-grid\n"
      "    tpu: {slice_name: ",
      slice, ", worker_id: ", worker, ", topology: ", topology, "}\n");
}

TestCluster::TestCluster(ClusterOptions options, std::string state_dir)
    : options_(std::move(options)), state_dir_(std::move(state_dir)) {}

absl::StatusOr<std::unique_ptr<TestCluster>> TestCluster::Empty() {
  std::string pattern = (fs::temp_directory_path() / "tessera-it-XXXXXX").string();
  if (mkdtemp(pattern.data()) == nullptr) {
    return absl::InternalError(absl::StrCat("mkdtemp: ", std::strerror(errno)));
  }
  fs::create_directories(fs::path(pattern) / "test-logs");
  return std::unique_ptr<TestCluster>(new TestCluster(ClusterOptions(), pattern));
}

absl::StatusOr<std::unique_ptr<TestCluster>> TestCluster::Start(ClusterOptions options) {
  TESSERA_ASSIGN_OR_RETURN(std::unique_ptr<TestCluster> cluster, Empty());
  cluster->options_ = std::move(options);
  TESSERA_RETURN_IF_ERROR(cluster->StartHead());
  if (cluster->options_.tap_agent_reports) {
    TESSERA_ASSIGN_OR_RETURN(cluster->tap_,
                             HeadTap::Start(cluster->head_address_, cluster->token()));
  }
  for (const NodeSpec& node : cluster->options_.nodes) {
    TESSERA_RETURN_IF_ERROR(cluster->StartNode(node));
    if (cluster->options_.register_in_order) {
      TESSERA_RETURN_IF_ERROR(cluster->WaitNodes({node.id}, v1::NODE_STATE_ALIVE));
    }
  }
  std::vector<std::string> ids;
  for (const NodeSpec& node : cluster->options_.nodes) ids.push_back(node.id);
  TESSERA_RETURN_IF_ERROR(cluster->WaitNodes(ids, v1::NODE_STATE_ALIVE));
  // An agent registers before it writes its address file: wait for the files too, so tests
  // that dial an agent (NodeAddress) never read a file that is not there yet.
  TESSERA_RETURN_IF_ERROR(cluster->WaitUntil([&]() -> absl::Status {
    for (const std::string& id : ids) {
      if (cluster->NodeAddress(id).empty()) {
        return absl::UnavailableError(absl::StrCat("no address file of node ", id, " yet"));
      }
    }
    return absl::OkStatus();
  }));
  return cluster;
}

TestCluster::~TestCluster() { TearDown(); }

std::string TestCluster::token() const {
  return client::ReadFirstLine(client::StateFolder{state_dir_}.TokenFile()).value_or("");
}

int TestCluster::Spawn(const std::vector<std::string>& argv, const std::string& log_name,
                       const std::string& out_file, const std::string& err_file) {
  const std::string log =
      absl::StrCat(state_dir_, "/test-logs/", log_name, "-", ++spawned_, ".log");
  std::vector<std::string> env_strings;
  for (char** e = environ; *e != nullptr; ++e) {
    const std::string_view entry(*e);
    if (entry.starts_with("TESSERA_STATE_DIR=") || entry.starts_with("TESSERA_TOKEN=")) continue;
    env_strings.emplace_back(entry);
  }
  env_strings.push_back("TESSERA_STATE_DIR=" + state_dir_);
  std::vector<char*> envp;
  for (std::string& s : env_strings) envp.push_back(s.data());
  envp.push_back(nullptr);
  std::vector<std::string> args = argv;
  std::vector<char*> argp;
  for (std::string& a : args) argp.push_back(a.data());
  argp.push_back(nullptr);

  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO,
                                   (out_file.empty() ? log : out_file).c_str(),
                                   O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_addopen(
      &actions, STDERR_FILENO, (err_file.empty() ? log : err_file).c_str(),
      O_WRONLY | O_CREAT | (err_file.empty() ? O_APPEND : O_TRUNC), 0644);
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  // Its own process group, so a signal meant for it never reaches the test runner.
  posix_spawnattr_setpgroup(&attr, 0);
  sigset_t none;
  sigemptyset(&none);
  posix_spawnattr_setsigmask(&attr, &none);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGMASK);
  pid_t pid = 0;
  const int rc = posix_spawnp(&pid, argp[0], &actions, &attr, argp.data(), envp.data());
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attr);
  return rc == 0 ? static_cast<int>(pid) : -1;
}

CliResult TestCluster::Cli(const std::vector<std::string>& args) const {
  return const_cast<TestCluster*>(this)->Wait(const_cast<TestCluster*>(this)->CliAsync(args));
}

int TestCluster::CliAsync(const std::vector<std::string>& args) {
  std::vector<std::string> argv = {TesseraBinary()};
  argv.insert(argv.end(), args.begin(), args.end());
  const int n = spawned_ + 1;
  const std::string out = absl::StrCat(state_dir_, "/test-logs/cli-", n, ".out");
  const std::string err = absl::StrCat(state_dir_, "/test-logs/cli-", n, ".err");
  const int pid = Spawn(argv, "cli", out, err);
  async_outputs_[pid] = {out, err};
  return pid;
}

CliResult TestCluster::Wait(int pid) {
  CliResult result;
  if (pid <= 0) {
    result.err = "could not start the tessera binary";
    return result;
  }
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  const auto files = async_outputs_[pid];
  result.out = ReadAll(files.first);
  result.err = ReadAll(files.second);
  async_outputs_.erase(pid);
  return result;
}

client::ClusterClient& TestCluster::client() {
  if (client_ == nullptr || client_->head_address() != head_address_) {
    client::ClusterClientOptions options;
    options.state_dir = state_dir_;
    options.head = client::HeadRequirement::kOptional;
    options.call_deadline = absl::Seconds(5);
    options.retry_budget = absl::Seconds(10);
    client_ = std::move(client::ClusterClient::Connect(options)).value();
  }
  return *client_;
}

absl::Status TestCluster::WaitUntil(const std::function<absl::Status()>& check,
                                    absl::Duration timeout) {
  const absl::Time until = absl::Now() + timeout;
  absl::Duration poll = absl::Milliseconds(10);
  while (true) {
    absl::Status s = check();
    if (s.ok() || absl::Now() >= until) return s;
    absl::SleepFor(poll);
    poll = std::min(poll * 2, absl::Milliseconds(100));
  }
}

absl::Status TestCluster::StartHead() {
  const client::StateFolder state{state_dir_};
  std::error_code ec;
  fs::remove(state.HeadAddressFile(), ec);
  std::vector<std::string> argv = {
      TesseraBinary(),          "start",       "--head",   "--block",        "--port",
      absl::StrCat(head_port_), "--state-dir", state_dir_, "--node-timeout", options_.node_timeout};
  argv.insert(argv.end(), options_.head_extra_args.begin(), options_.head_extra_args.end());
  head_pid_ = Spawn(argv, "head");
  if (head_pid_ <= 0) return absl::InternalError("cannot start the head");
  TESSERA_RETURN_IF_ERROR(WaitUntil(
      [&]() -> absl::Status {
        if (ReapIfDone(head_pid_)) {
          return absl::FailedPreconditionError(absl::StrCat(
              "the head exited; its log: ",
              ReadAll(absl::StrCat(state_dir_, "/test-logs/head-", spawned_, ".log"))));
        }
        auto address = client::ReadFirstLine(state.HeadAddressFile());
        if (!address.ok() || address->empty()) return absl::UnavailableError("no head.address yet");
        head_address_ = *address;
        auto listed = client().ListNodes();
        return listed.status();
      },
      options_.ready_timeout));
  const size_t colon = head_address_.rfind(':');
  if (colon != std::string::npos) {
    (void)absl::SimpleAtoi(head_address_.substr(colon + 1), &head_port_);
  }
  return absl::OkStatus();
}

absl::Status TestCluster::KillHead() {
  if (head_pid_ <= 0) return absl::FailedPreconditionError("no head");
  kill(head_pid_, SIGKILL);
  int status = 0;
  waitpid(head_pid_, &status, 0);
  head_pid_ = 0;
  return absl::OkStatus();
}

absl::Status TestCluster::StartNode(const NodeSpec& node) {
  std::vector<std::string> argv = node.wrapper;
  argv.insert(argv.end(), {TesseraBinary(), "start", "--block", "--address",
                           !node.head_address.empty() ? node.head_address
                           : tap_ != nullptr          ? tap_->address()
                                                      : head_address_,
                           "--node-id", node.id, "--state-dir", state_dir_});
  if (!node.cluster_file.empty()) {
    argv.insert(argv.end(), {"--cluster-file", node.cluster_file});
  } else {
    const std::string hardware = absl::StrCat(state_dir_, "/test-logs/", node.id, ".yaml");
    WriteFile(hardware, node.hardware_yaml.empty() ? CpuHost(4) : node.hardware_yaml);
    argv.insert(argv.end(), {"--hardware", hardware});
  }
  if (!node.labels.empty()) argv.insert(argv.end(), {"--labels", node.labels});
  if (!node.resources.empty()) argv.insert(argv.end(), {"--resources", node.resources});
  // Small stores unless the test sizes one: tests keep shared memory well under 2 GiB in all.
  if (std::find(node.extra_args.begin(), node.extra_args.end(), "--object-store-memory") ==
      node.extra_args.end()) {
    argv.insert(argv.end(), {"--object-store-memory", "32MiB"});
  }
  argv.insert(argv.end(), node.extra_args.begin(), node.extra_args.end());
  const int pid = Spawn(argv, absl::StrCat("agent-", node.id));
  if (pid <= 0) return absl::InternalError(absl::StrCat("cannot start node ", node.id));
  node_pids_[node.id] = pid;
  return absl::OkStatus();
}

absl::Status TestCluster::KillNode(const std::string& node_id, int signal) {
  const auto it = node_pids_.find(node_id);
  if (it == node_pids_.end()) return absl::NotFoundError(node_id);
  kill(it->second, signal);
  int status = 0;
  waitpid(it->second, &status, 0);
  node_pids_.erase(it);
  return absl::OkStatus();
}

absl::StatusOr<std::vector<int>> TestCluster::KillMachine(const std::string& node_id) {
  const auto it = node_pids_.find(node_id);
  if (it == node_pids_.end()) return absl::NotFoundError(node_id);
  const int agent = it->second;
  // Stopped first, so it starts no process between the listing and the kill.
  kill(agent, SIGSTOP);
  std::vector<int> below = DescendantsOf(agent);
  for (int pid : below) kill(pid, SIGKILL);
  kill(agent, SIGKILL);
  int status = 0;
  waitpid(agent, &status, 0);
  node_pids_.erase(it);
  return below;
}

absl::Status TestCluster::FreezeMachine(const std::string& node_id) {
  const auto it = node_pids_.find(node_id);
  if (it == node_pids_.end()) return absl::NotFoundError(node_id);
  kill(it->second, SIGSTOP);
  for (int pid : DescendantsOf(it->second)) kill(pid, SIGSTOP);
  return absl::OkStatus();
}

absl::Status TestCluster::ThawMachine(const std::string& node_id) {
  const auto it = node_pids_.find(node_id);
  if (it == node_pids_.end()) return absl::NotFoundError(node_id);
  // The processes under it first, so the agent finds its workers running when it resumes.
  for (int pid : DescendantsOf(it->second)) kill(pid, SIGCONT);
  kill(it->second, SIGCONT);
  return absl::OkStatus();
}

std::vector<int> TestCluster::DescendantsOf(int pid) {
  // ppid of every process, from /proc/<pid>/stat ("pid (comm) state ppid ...": comm may hold
  // spaces and parentheses, so read after the last ')').
  std::map<int, std::vector<int>> children;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator("/proc", ec)) {
    int child = 0;
    if (!absl::SimpleAtoi(entry.path().filename().string(), &child)) continue;
    const std::string stat = ReadAll(absl::StrCat("/proc/", child, "/stat"));
    const size_t close = stat.rfind(')');
    if (close == std::string::npos) continue;
    std::istringstream rest(stat.substr(close + 1));
    std::string state;
    int ppid = 0;
    if (rest >> state >> ppid) children[ppid].push_back(child);
  }
  std::vector<int> out;
  std::vector<int> todo = {pid};
  while (!todo.empty()) {
    const int parent = todo.back();
    todo.pop_back();
    for (int child : children[parent]) {
      out.push_back(child);
      todo.push_back(child);
    }
  }
  return out;
}

absl::Status TestCluster::SignalAgent(const std::string& node_id, int signal) {
  const auto it = node_pids_.find(node_id);
  if (it == node_pids_.end()) return absl::NotFoundError(node_id);
  if (kill(it->second, signal) != 0) {
    return absl::InternalError(absl::StrCat("kill ", it->second, ": ", std::strerror(errno)));
  }
  return absl::OkStatus();
}

int TestCluster::NodePid(const std::string& node_id) const {
  const auto it = node_pids_.find(node_id);
  return it == node_pids_.end() ? 0 : it->second;
}

std::string TestCluster::NodeAddress(const std::string& node_id) const {
  return client::ReadFirstLine(client::StateFolder{state_dir_}.AgentAddressFile(node_id))
      .value_or("");
}

absl::Status TestCluster::WaitNodes(const std::vector<std::string>& ids, v1::NodeState state) {
  return WaitUntil(
      [&]() -> absl::Status {
        for (const auto& [id, pid] : node_pids_) {
          if (state == v1::NODE_STATE_ALIVE && ReapIfDone(pid)) {
            return absl::FailedPreconditionError(absl::StrCat("node agent ", id, " exited"));
          }
        }
        auto nodes = client().ListNodes();
        if (!nodes.ok()) return nodes.status();
        std::set<std::string> missing(ids.begin(), ids.end());
        for (const auto& n : nodes->nodes()) {
          if (n.state() == state) missing.erase(n.node().node_id());
        }
        // Alive means up here too: an agent registers with the head before it writes its
        // address file, which a driver starting on this host reads to find its node (and store).
        if (state == v1::NODE_STATE_ALIVE) {
          for (const std::string& id : ids) {
            if (node_pids_.contains(id) && NodeAddress(id).empty()) missing.insert(id);
          }
        }
        if (missing.empty()) return absl::OkStatus();
        return absl::UnavailableError(absl::StrCat("not yet ", ToAbsl(rpc::NodeStateName(state)),
                                                   ": ", absl::StrJoin(missing, ", ")));
      },
      options_.ready_timeout);
}

std::vector<int> TestCluster::ProcessesOfThisCluster() const {
  std::vector<int> pids;
  const std::string marker = "TESSERA_STATE_DIR=" + state_dir_;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator("/proc", ec)) {
    int pid = 0;
    if (!absl::SimpleAtoi(entry.path().filename().string(), &pid) || pid == getpid()) continue;
    const std::string environ_text = ReadAll(absl::StrCat("/proc/", pid, "/environ"));
    size_t start = 0;
    while (start < environ_text.size()) {
      const size_t end = environ_text.find('\0', start);
      const std::string_view var(environ_text.data() + start,
                                 (end == std::string::npos ? environ_text.size() : end) - start);
      if (var == marker) {
        if (Alive(pid)) pids.push_back(pid);
        break;
      }
      if (end == std::string::npos) break;
      start = end + 1;
    }
  }
  return pids;
}

void TestCluster::TearDown() {
  client_.reset();
  // Ask politely (SIGTERM), then kill whatever of this cluster is left, workers included.
  std::vector<int> ours;
  for (const auto& [id, pid] : node_pids_) ours.push_back(pid);
  if (head_pid_ > 0) ours.push_back(head_pid_);
  for (const auto& [pid, files] : async_outputs_) ours.push_back(pid);
  for (int pid : ours) kill(pid, SIGTERM);
  const absl::Time until = absl::Now() + absl::Seconds(5);
  for (int pid : ours) {
    while (!ReapIfDone(pid) && absl::Now() < until) absl::SleepFor(absl::Milliseconds(10));
  }
  for (int round = 0; round < 3; ++round) {
    std::vector<int> left = ProcessesOfThisCluster();
    for (int pid : ours) {
      if (Alive(pid)) left.push_back(pid);
    }
    if (left.empty()) break;
    for (int pid : left) kill(pid, SIGKILL);
    for (int pid : left) {
      const absl::Time deadline = absl::Now() + absl::Seconds(2);
      while (!ReapIfDone(pid) && Alive(pid) && absl::Now() < deadline) {
        absl::SleepFor(absl::Milliseconds(5));
      }
    }
  }
  node_pids_.clear();
  head_pid_ = 0;
  tap_.reset();
  if (std::getenv("TESSERA_KEEP_TEST_STATE") == nullptr) {
    std::error_code ec;
    fs::remove_all(state_dir_, ec);
  }
}

}  // namespace tessera::testing
