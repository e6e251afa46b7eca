// tessera run [--resources LIST] [--label-selector EXPR]... [--strategy DEFAULT|SPREAD]
//             [--placement-group NAME [--bundle I]] [--env K=V]... [--cwd DIR] [--wait DUR]
//             -- CMD ARGS...
// Runs one command as a worker on the cluster: asks a node agent for a lease (the one on this
// machine, else the node the head picks), follows spillbacks, streams the worker's stdout and
// stderr to its own, records the job with the head, and exits with the worker's exit code
// (128 + signal when it was killed). Ctrl-C (or SIGTERM) kills the worker, whose exit then ends
// the command as usual; a command killed outright has its worker stopped by the agent.
// A request nothing can ever hold fails at once with the reason (exit code 1): inside a
// placement group that is a group that does not exist, a bundle index out of range, or a demand
// larger than the bundle reserves or naming a resource it lacks; a request that fits its bundle
// waits while the bundle's other work holds it. The job's end recorded at the head is the one the
// worker had, also when the head presumed it failed while its node was silent.
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <functional>
#include <iostream>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "base/status_macros.h"
#include "base/string_util.h"
#include "cli/cluster_args.h"
#include "cli/cluster_command_start.h"
#include "cli/cluster_format.h"
#include "cli/commands.h"
#include "cli/signal_waiter.h"
#include "client/cluster_client.h"
#include "client/lease_round.h"
#include "client/state_folder.h"
#include "labels/label_selector.h"
#include "resources/resource_set.h"
#include "rpc/state_names.h"
#include "wire/proto_convert.h"

namespace tessera::cli {
namespace {

using tessera::v1::LeaseGrant;
using tessera::v1::LeaseReply;
using tessera::v1::LeaseRequest;

struct RunArgs {
  CommonClusterArgs common;
  // Not given: CPU=1 for a plain run; nothing extra inside a placement group (the bundle's own
  // reservation is what the worker runs in; ask for its devices, e.g. TPU=4, to get them).
  std::string resources;
  std::vector<std::string> selectors;
  std::string strategy = "DEFAULT";
  std::string placement_group;
  int bundle = -1;
  std::vector<std::string> env;
  std::string cwd;
  std::string wait;
  std::vector<std::string> command;
};

absl::StatusOr<LeaseRequest> BuildLeaseRequest(const RunArgs& args) {
  LeaseRequest lease;
  tessera::v1::ResourceRequest& request = *lease.mutable_request();
  auto resources = ParseResourceSet(args.resources);
  if (!resources.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("--resources: ", resources.status().message()));
  }
  *request.mutable_resources() = wire::ResourcesToProto(*resources);
  for (size_t i = 0; i < args.selectors.size(); ++i) {
    auto selector = ParseLabelSelector(args.selectors[i]);
    if (!selector.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("--label-selector: ", selector.status().message()));
    }
    if (i == 0) {
      wire::LabelSelectorToProto(*selector, request.mutable_label_selector());
    } else {
      wire::LabelSelectorToProto(*selector, request.add_fallbacks());
    }
  }
  if (args.strategy == "SPREAD") {
    request.set_strategy(tessera::v1::STRATEGY_SPREAD);
  } else if (args.strategy != "DEFAULT") {
    return absl::InvalidArgumentError(
        absl::StrCat("--strategy: ", Quote(args.strategy), " is not DEFAULT or SPREAD"));
  }
  if (!args.placement_group.empty()) {
    request.set_placement_group(args.placement_group);
    request.set_bundle_index(args.bundle);
  } else if (args.bundle != -1) {
    return absl::InvalidArgumentError("--bundle needs --placement-group");
  }
  if (args.bundle < -1) {
    return absl::InvalidArgumentError("--bundle: a bundle index, or -1 for any bundle");
  }
  if (args.command.empty()) {
    return absl::InvalidArgumentError("no command given (tessera run [options] -- CMD ARGS...)");
  }
  tessera::v1::WorkerSpec& worker = *lease.mutable_worker();
  for (const std::string& arg : args.command) worker.add_argv(arg);
  for (const std::string& pair : args.env) {
    const size_t eq = pair.find('=');
    if (eq == std::string::npos || eq == 0) {
      return absl::InvalidArgumentError(absl::StrCat("--env: ", Quote(pair), " is not NAME=VALUE"));
    }
    (*worker.mutable_env())[pair.substr(0, eq)] = pair.substr(eq + 1);
  }
  std::error_code ec;
  worker.set_cwd(args.cwd.empty() ? std::filesystem::current_path(ec).string() : args.cwd);
  // This command watches the worker; if it is killed, its agent stops the worker instead of
  // leaving it to hold its resources (or its bundle) with nobody to read it.
  worker.set_stop_when_unwatched(true);
  lease.set_job_id(client::NewRequestId("job"));
  // The program's own tasks are reported under this job (`tessera timeline JOB`).
  (*worker.mutable_env())["TESSERA_JOB_ID"] = lease.job_id();
  return lease;
}

struct Granted {
  LeaseGrant grant;
  std::string address;  // of the agent that granted it
};

// Asks agents until one grants the lease: spillbacks are followed, a pending answer is retried
// (backing off) until `wait` runs out.
absl::StatusOr<Granted> AcquireLease(client::ClusterClient& client, LeaseRequest lease,
                                     absl::Duration wait,
                                     const std::function<bool()>& interrupted) {
  const absl::Time until = absl::Now() + wait;
  absl::Duration backoff = absl::Milliseconds(50);
  bool told_waiting = false;
  client::LeaseRoundCalls calls;
  calls.pick_node = [&](const tessera::v1::ResourceRequest& request,
                        tessera::v1::PickNodeResponse* picked) {
    tessera::v1::PickNodeRequest pick;
    *pick.mutable_request() = request;
    return client.Call(client.HeadPeer(), client::Retry::kSafe, [&](grpc::ClientContext* c) {
      return client.head_nodes().PickNode(c, pick, picked);
    });
  };
  calls.request_lease = [&](const std::string& address, const LeaseRequest& request,
                            LeaseReply* reply) {
    return client.Call(absl::StrCat("the node agent at ", address), client::Retry::kSafe,
                       [&](grpc::ClientContext* c) {
                         return client.agent(address).RequestLease(c, request, reply);
                       });
  };
  calls.request_id = [] { return client::NewRequestId("lease"); };
  while (true) {
    TESSERA_ASSIGN_OR_RETURN(
        client::LeaseRoundOutcome round,
        client::RunLeaseRound(lease, client::LocalAgentAddress(client.state()), calls));
    if (round.grant.has_value()) return Granted{*std::move(round.grant), round.address};
    if (round.hop_limit) {
      return absl::UnavailableError(absl::StrCat("the lease was sent on ", client::kMaxLeaseHops,
                                                 " times without being granted"));
    }
    // Why nothing took it this round: pending or infeasible, with the explanation.
    const tessera::v1::PickStatus status = round.status;
    const std::string& explanation = round.explanation;
    if (status == tessera::v1::PICK_STATUS_INFEASIBLE || absl::Now() >= until) {
      return absl::ResourceExhaustedError(
          absl::StrCat("cannot run the command",
                       status == tessera::v1::PICK_STATUS_UNSPECIFIED
                           ? ""
                           : absl::StrCat(" (", ToAbsl(rpc::PickStatusName(status)), ")"),
                       explanation.empty() ? "" : ": ", explanation));
    }
    if (interrupted()) return absl::CancelledError("interrupted while waiting for resources");
    if (!told_waiting) {
      std::cerr << "tessera: waiting for resources: " << explanation << "\n";
      told_waiting = true;
    }
    absl::SleepFor(std::min(backoff, until - absl::Now()));
    backoff = std::min(backoff * 2, absl::Seconds(1));
  }
}

void WriteAll(int fd, const std::string& data) {
  size_t done = 0;
  while (done < data.size()) {
    const ssize_t n = write(fd, data.data() + done, data.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;  // the reader went away; the worker keeps running to its end
    done += static_cast<size_t>(n);
  }
}

int64_t NowMs() { return absl::ToUnixMillis(absl::Now()); }

// Forwards SIGINT/SIGTERM/SIGHUP to the worker while the command runs (SignalWaiter).
// Thread-safe: SetWorker and Stop may be called from the main thread while the waiter runs.
class SignalForwarder {
 public:
  void Start(client::ClusterClient* client) {
    client_ = client;
    waiter_.Start([this](int sig) {
      std::lock_guard<std::mutex> lock(mu_);
      interrupted_ = true;
      signal_ = sig;
      if (!worker_id_.empty()) KillLocked();
    });
  }

  void SetWorker(std::string address, std::string worker_id) {
    std::lock_guard<std::mutex> lock(mu_);
    address_ = std::move(address);
    worker_id_ = std::move(worker_id);
    if (interrupted_) KillLocked();
  }

  bool interrupted() {
    std::lock_guard<std::mutex> lock(mu_);
    return interrupted_;
  }

  void Stop() { waiter_.Stop(); }

 private:
  void KillLocked() {
    tessera::v1::KillWorkerRequest request;
    request.set_worker_id(worker_id_);
    // The worker gets the signal this command got, as a local process would from the terminal.
    request.set_signal(signal_);
    tessera::v1::KillWorkerResponse response;
    const absl::Status status =
        client_->Call(absl::StrCat("the node agent at ", address_), client::Retry::kSafe,
                      [&](grpc::ClientContext* c) {
                        return client_->agent(address_).KillWorker(c, request, &response);
                      });
    if (!status.ok())
      std::cerr << "tessera: warning: could not stop the worker: " << status.message() << "\n";
  }

  SignalWaiter waiter_;  // first: blocks the signals before anything else exists
  client::ClusterClient* client_ = nullptr;
  std::mutex mu_;
  bool interrupted_ = false;
  int signal_ = 0;
  std::string address_;
  std::string worker_id_;
};

// Records the job with the head; returns the head's record of it after the update.
absl::StatusOr<tessera::v1::JobInfo> RecordJob(client::ClusterClient& client,
                                               const tessera::v1::JobInfo& job) {
  tessera::v1::RecordJobRequest request;
  *request.mutable_job() = job;
  tessera::v1::JobInfo response;
  TESSERA_RETURN_IF_ERROR(client.Call(
      client.HeadPeer(), client::Retry::kSafe,
      [&](grpc::ClientContext* c) { return client.head_jobs().RecordJob(c, request, &response); }));
  return response;
}

// Records how the job ended. The command's exit code is the worker's whatever the head says;
// a head whose record still disagrees (an ended job stays as it ended) gets a warning naming
// both, so the listing's state is never a silent contradiction of what the terminal showed.
void RecordJobEnd(client::ClusterClient& client, const tessera::v1::JobInfo& job) {
  auto recorded = RecordJob(client, job);
  if (!recorded.ok()) {
    std::cerr << "tessera: warning: the job's end was not recorded: " << recorded.status().message()
              << "\n";
    return;
  }
  if (recorded->state() != job.state()) {
    const std::string why =
        recorded->exit_reason().empty() ? "" : absl::StrCat(" (", recorded->exit_reason(), ")");
    std::cerr << "tessera: warning: the head keeps job " << job.job_id() << " as "
              << rpc::JobStateName(recorded->state()) << why << " although its worker ended "
              << rpc::JobStateName(job.state()) << "\n";
  }
}

int RunCommand(const RunArgs& args) {
  auto lease = BuildLeaseRequest(args);
  if (!lease.ok()) return ReportError(lease.status());
  auto wait = ParseWaitFlag(args.wait, absl::InfiniteDuration());
  if (!wait.ok()) return ReportError(wait.status());
  // Not StartClusterCommand: the forwarder must exist before the connection's gRPC threads.
  SignalForwarder forwarder;  // before any gRPC thread exists, so they inherit the mask
  auto client = ConnectCluster(args.common);
  if (!client.ok()) return ReportError(client.status());
  client::ClusterClient& c = **client;
  forwarder.Start(&c);

  auto granted = AcquireLease(c, *lease, *wait, [&] { return forwarder.interrupted(); });
  if (!granted.ok()) return ReportError(granted.status());
  const LeaseGrant& grant = granted->grant;
  forwarder.SetWorker(granted->address, grant.worker_id());

  tessera::v1::JobInfo job;
  job.set_job_id(lease->job_id());
  *job.mutable_argv() = lease->worker().argv();
  job.set_node_id(grant.node_id());
  job.set_worker_id(grant.worker_id());
  job.set_state(tessera::v1::JOB_STATE_RUNNING);
  job.set_start_time_ms(NowMs());
  if (auto recorded = RecordJob(c, job); !recorded.ok()) {
    std::cerr << "tessera: warning: the job was not recorded: " << recorded.status().message()
              << "\n";
  }

  tessera::v1::WatchWorkerRequest watch;
  watch.set_worker_id(grant.worker_id());
  auto context = c.StreamContext();
  auto stream = c.agent(granted->address).WatchWorker(context.get(), watch);
  tessera::v1::WorkerEvent event;
  std::optional<tessera::v1::WorkerExit> exit;
  while (stream->Read(&event)) {
    if (event.has_stdout()) WriteAll(STDOUT_FILENO, event.stdout());
    if (event.has_stderr()) WriteAll(STDERR_FILENO, event.stderr());
    if (event.has_exit()) exit = event.exit();
  }
  const grpc::Status finished = stream->Finish();
  forwarder.Stop();

  job.set_end_time_ms(NowMs());
  int code = 1;
  if (!exit.has_value()) {
    const std::string why = absl::StrCat(
        "lost contact with node ", grant.node_id(), " while worker ", grant.worker_id(), " ran: ",
        client::FromGrpc(finished, absl::StrCat("the node agent at ", granted->address)).message());
    job.set_state(tessera::v1::JOB_STATE_FAILED);
    job.set_exit_reason(why);
    RecordJobEnd(c, job);  // warns when the head did not take it
    return ReportError(why);
  }
  job.set_state(exit->exit_code() == 0 && exit->signal() == 0 && !exit->out_of_memory()
                    ? tessera::v1::JOB_STATE_SUCCEEDED
                    : tessera::v1::JOB_STATE_FAILED);
  job.set_exit_reason(exit->reason());
  // The worker's end as its agent reported it, also when the head presumed the job failed while
  // the node was silent (the head takes this real end over its presumption).
  RecordJobEnd(c, job);
  if (exit->signal() != 0 || exit->out_of_memory()) {
    std::cerr << "tessera: worker " << grant.worker_id() << " on node " << grant.node_id() << " "
              << (exit->reason().empty() ? absl::StrCat("killed by signal ", exit->signal())
                                         : exit->reason())
              << "\n";
    code = exit->signal() != 0 ? 128 + exit->signal() : 128 + SIGKILL;
  } else {
    code = exit->exit_code();
  }
  return code;
}

}  // namespace

void AddRunCommand(CLI::App& app, int& exit_code) {
  auto args = std::make_shared<RunArgs>();
  CLI::App* cmd =
      app.add_subcommand("run", "Run a command as a worker on the cluster and stream its output");
  CLI::Option* resources =
      cmd->add_option(
             "--resources", args->resources,
             "What the worker needs (default CPU=1; inside a placement group: nothing extra)")
          ->type_name("LIST");
  // Repeatable flags take one value each, so the `--` after them still starts the command.
  cmd->add_option("--label-selector", args->selectors,
                  "Node label selector; repeat for fallbacks, tried in order")
      ->type_name("EXPR")
      ->allow_extra_args(false);
  cmd->add_option("--strategy", args->strategy, "DEFAULT (local, then pack) or SPREAD")
      ->type_name("S");
  cmd->add_option("--placement-group", args->placement_group, "Run inside this group's bundle")
      ->type_name("NAME");
  cmd->add_option("--bundle", args->bundle, "Bundle index in the group (-1: any bundle)")
      ->type_name("I");
  cmd->add_option("--env", args->env, "Environment variable for the worker (repeatable)")
      ->type_name("NAME=VALUE")
      ->allow_extra_args(false);
  cmd->add_option("--cwd", args->cwd, "Working folder of the worker (default: this one)")
      ->type_name("DIR");
  cmd->add_option("--wait", args->wait,
                  "How long to wait for resources when the cluster is busy (default: forever)")
      ->type_name("DUR");
  AddCommonClusterFlags(*cmd, args->common);
  cmd->add_option("COMMAND", args->command, "The command and its arguments, after --")->required();
  cmd->callback([args, resources, &exit_code] {
    if (resources->count() == 0) args->resources = args->placement_group.empty() ? "CPU=1" : "";
    exit_code = RunCommand(*args);
  });
}

}  // namespace tessera::cli
