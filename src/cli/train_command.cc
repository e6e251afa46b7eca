// tessera train [where] [--max-restarts K] [--hang-timeout DUR] [--name N] [--env K=V|K]...
//               [--working-dir DIR] [--detach] [--start-timeout DUR] -- CMD ARGS...
//   where: --accelerator TPU-V6E --topology 4x4 [--slices K] [--per-chip]
//        | --nvlink-hosts N --per-host R
//        | --workers N|MIN:MAX --resources-per-worker R [--strategy PACK|SPREAD|STRICT_PACK|...]
//        | --nnodes N|MIN:MAX --nproc-per-node K [--resources-per-node R]
//        (ranges are elastic: start with what fits, shrink on a failure, grow when room returns;
//        --slices MIN:MAX counts whole slices; --elastic-check DUR)
//        [--label-selector EXPR]...
// A drop-in for torchrun: the command runs as one gang of ranks on the cluster, with torchrun's
// environment, restarted as a group on failure (docs/train.md). The job is owned by the
// cluster's head; this command follows it, printing every rank's output prefixed "[rankN]: ",
// and exits with the job's exit code. Its stdin goes to rank 0 (unless --no-stdin, or it is
// /dev/null). Ctrl-C or SIGTERM stops the job; with --detach it prints the job id and returns at
// once.
#include <poll.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <iostream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "cli/cluster_args.h"
#include "cli/commands.h"
#include "cli/job_client.h"
#include "cli/signal_waiter.h"
#include "cli/slice_flags.h"
#include "client/cluster_client.h"
#include "client/reservation_calls.h"
#include "labels/label_selector.h"
#include "resources/resource_set.h"
#include "wire/proto_convert.h"

namespace tessera::cli {
namespace {

struct TrainArgs {
  CommonClusterArgs common;
  JobProcessArgs process;
  std::string accelerator;
  std::string topology;
  std::string slices = "1";
  bool per_chip = false;
  int nvlink_hosts = 0;
  std::string per_host;
  std::string workers;
  std::string resources_per_worker;
  std::string strategy;
  std::string nnodes;
  int nproc_per_node = 1;
  std::string resources_per_node;
  std::vector<std::string> selectors;
  std::string start_timeout;
  std::string elastic_check;
  bool detach = false;
  bool no_stdin = false;
};

absl::StatusOr<v1::Resources> ParseResources(const std::string& flag, const std::string& text) {
  auto parsed = ParseResourceSet(text);
  if (!parsed.ok())
    return absl::InvalidArgumentError(absl::StrCat(flag, ": ", parsed.status().message()));
  return wire::ResourcesToProto(*parsed);
}

// --accelerator/--topology (whole TPU slices) or --nvlink-hosts, and --per-host, as the
// placement's slice alternative.
absl::Status AddSlices(const TrainArgs& args, v1::GangPlacement& placement) {
  if (!args.accelerator.empty() || !args.topology.empty()) {
    int min = 0;
    int max = 0;
    if (absl::Status s = ParseCountRange("--slices", args.slices, &min, &max); !s.ok()) return s;
    const char* what = "--accelerator/--topology";
    absl::StatusOr<SliceShape> shape = ParseSliceFlags(what, args.accelerator, args.topology);
    if (!shape.ok()) return shape.status();
    auto alternative = client::TpuSliceAlternative(what, *shape, max, args.per_chip);
    if (!alternative.ok()) return alternative.status();
    *placement.add_slices() = *alternative;
    if (min < max) placement.set_min_slices(min);
  } else if (args.per_chip || args.slices != "1") {
    return absl::InvalidArgumentError("--slices and --per-chip go with --accelerator/--topology");
  }
  if (args.nvlink_hosts > 0) {
    if (args.per_host.empty()) {
      return absl::InvalidArgumentError("--nvlink-hosts needs --per-host, e.g. --per-host GPU=4");
    }
    v1::SliceAlternative* alt = placement.add_slices();
    alt->set_nvlink_hosts(args.nvlink_hosts);
    auto per_host = ParseResources("--per-host", args.per_host);
    if (!per_host.ok()) return per_host.status();
    *alt->mutable_per_host() = *per_host;
  } else if (!args.per_host.empty() && placement.slices_size() > 0) {
    auto per_host = ParseResources("--per-host", args.per_host);
    if (!per_host.ok()) return per_host.status();
    *placement.mutable_slices(0)->mutable_per_host() = *per_host;
  }
  return absl::OkStatus();
}

// --workers (with --resources-per-worker, --strategy) or --nnodes (with --nproc-per-node,
// --resources-per-node), as the placement's members.
absl::Status SetWorkersOrNodes(const TrainArgs& args, v1::GangPlacement& placement) {
  if (!args.workers.empty()) {
    int min = 0;
    int max = 0;
    if (absl::Status s = ParseCountRange("--workers", args.workers, &min, &max); !s.ok()) return s;
    placement.set_min_workers(min);
    placement.set_max_workers(max);
    auto resources =
        ParseResources("--resources-per-worker",
                       args.resources_per_worker.empty() ? "CPU=1" : args.resources_per_worker);
    if (!resources.ok()) return resources.status();
    *placement.mutable_resources_per_worker() = *resources;
    auto strategy = ParsePlacementStrategy(args.strategy.empty() ? "PACK" : args.strategy);
    if (!strategy.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("--strategy: ", strategy.status().message()));
    }
    placement.set_strategy(wire::PlacementStrategyToProto(*strategy));
  } else if (!args.resources_per_worker.empty() || !args.strategy.empty()) {
    return absl::InvalidArgumentError("--resources-per-worker and --strategy go with --workers");
  }
  if (!args.nnodes.empty()) {
    int min = 0;
    int max = 0;
    if (absl::Status s = ParseCountRange("--nnodes", args.nnodes, &min, &max); !s.ok()) return s;
    if (args.nproc_per_node < 1)
      return absl::InvalidArgumentError("--nproc-per-node: must be 1 or more");
    placement.set_min_nodes(min);
    placement.set_max_nodes(max);
    placement.set_nproc_per_node(args.nproc_per_node);
    auto resources =
        ParseResources("--resources-per-node", args.resources_per_node.empty()
                                                   ? absl::StrCat("CPU=", args.nproc_per_node)
                                                   : args.resources_per_node);
    if (!resources.ok()) return resources.status();
    *placement.mutable_resources_per_node() = *resources;
  } else if (!args.resources_per_node.empty()) {
    return absl::InvalidArgumentError("--resources-per-node goes with --nnodes");
  }
  return absl::OkStatus();
}

absl::StatusOr<v1::SubmitJobRequest> BuildTrainRequest(const TrainArgs& args) {
  v1::SubmitJobRequest request;
  request.set_request_id(client::NewRequestId("train"));
  request.set_attached(!args.detach);
  v1::JobSpec& spec = *request.mutable_spec();
  spec.set_torch_env(true);
  v1::GangPlacement& placement = *spec.mutable_placement();
  const int kinds = (!args.accelerator.empty() || !args.topology.empty() ? 1 : 0) +
                    (args.nvlink_hosts > 0 ? 1 : 0) + (!args.workers.empty() ? 1 : 0) +
                    (!args.nnodes.empty() ? 1 : 0);
  if (kinds != 1) {
    return absl::InvalidArgumentError(
        "say where the gang runs, once: --accelerator TYPE --topology SHAPE (whole slices), "
        "--nvlink-hosts N, --workers N, or --nnodes N --nproc-per-node K");
  }
  if (absl::Status s = AddSlices(args, placement); !s.ok()) return s;
  if (absl::Status s = SetWorkersOrNodes(args, placement); !s.ok()) return s;
  for (const std::string& text : args.selectors) {
    auto selector = ParseLabelSelector(text);
    if (!selector.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("--label-selector: ", selector.status().message()));
    }
    wire::LabelSelectorToProto(*selector, placement.add_label_selectors());
  }
  if (!args.selectors.empty() && placement.slices_size() > 0) {
    return absl::InvalidArgumentError(
        "--label-selector goes with --workers or --nnodes (a slice is chosen by its shape)");
  }
  if (!args.start_timeout.empty()) {
    auto timeout = client::ParseDurationFlag("--start-timeout", args.start_timeout);
    if (!timeout.ok()) return timeout.status();
    spec.set_start_timeout_ms(std::max<int64_t>(1, absl::ToInt64Milliseconds(*timeout)));
  }
  if (!args.elastic_check.empty()) {
    auto check = client::ParseDurationFlag("--elastic-check", args.elastic_check);
    if (!check.ok()) return check.status();
    spec.set_elastic_check_ms(std::max<int64_t>(1, absl::ToInt64Milliseconds(*check)));
  }
  if (absl::Status s = FillJobProcess(args.process, &spec); !s.ok()) return s;
  return request;
}

// SIGINT, SIGTERM and SIGHUP stop the job.
void StopJobOnSignal(client::ClusterClient* client, const std::string& job, int sig) {
  std::cerr << "tessera: stopping job " << job << " (" << sigabbrev_np(sig) << ")\n";
  v1::StopJobRequest request;
  request.set_job_id(job);
  request.set_reason(absl::StrCat("its client got SIG", sigabbrev_np(sig)));
  v1::JobStatus response;
  const absl::Status stopped =
      client->Call(client->HeadPeer(), client::Retry::kSafe, [&](grpc::ClientContext* c) {
        c->set_deadline(std::chrono::system_clock::now() + std::chrono::minutes(2));
        return client->jobs().StopJob(c, request, &response);
      });
  // Said, not dropped: the command goes on following a job that then runs on.
  if (!stopped.ok()) {
    std::cerr << "tessera: warning: job " << job << " was not stopped: " << stopped.message()
              << "\n";
  }
}

// Whether this command's stdin is input a user means for rank 0: a pipe, a file or a socket, or
// a terminal this process has in the foreground; not /dev/null.
bool StdinIsInput() {
  struct stat st {};
  if (::fstat(STDIN_FILENO, &st) != 0) return false;
  if (S_ISFIFO(st.st_mode) || S_ISREG(st.st_mode) || S_ISSOCK(st.st_mode)) return true;
  return ::isatty(STDIN_FILENO) == 1 && ::tcgetpgrp(STDIN_FILENO) == ::getpgrp();
}

// Feeds this command's stdin to rank 0 (tessera.v1.Jobs.WriteJobStdin) until end of file, then
// closes it there; input is taken by the rank 0 running at the time (none while the gang
// restarts: it is offered again until one takes it). Stops when told. Thread-safe.
class StdinForwarder {
 public:
  StdinForwarder(client::ClusterClient* client, std::string job)
      : client_(client), job_(std::move(job)), thread_([this] { Loop(); }) {}
  ~StdinForwarder() {
    stop_.store(true);
    thread_.join();
  }

 private:
  // Sends `data` (and the close with it) until rank 0 has taken all of it; false when stopped
  // or the job can take no more.
  bool Send(std::string data, bool close) {
    while (!stop_.load()) {
      v1::WriteJobStdinRequest request;
      request.set_job_id(job_);
      request.set_data(data);
      request.set_close(close);
      v1::WriteJobStdinResponse response;
      absl::Status sent =
          client_->Call(client_->HeadPeer(), client::Retry::kNever, [&](grpc::ClientContext* c) {
            return client_->jobs().WriteJobStdin(c, request, &response);
          });
      if (sent.ok()) {
        data.erase(0, std::min<size_t>(response.written(), data.size()));
        if (data.empty()) return true;
      } else if (!absl::IsUnavailable(sent) && !absl::IsNotFound(sent)) {
        return false;  // the job ended, or does not forward stdin
      }
      absl::SleepFor(absl::Milliseconds(20));  // rank 0 is starting, or reads slowly
    }
    return false;
  }

  void Loop() {
    std::string buffer(64 * 1024, '\0');
    while (!stop_.load()) {
      pollfd fd{STDIN_FILENO, POLLIN, 0};
      const int ready = ::poll(&fd, 1, 100);
      if (ready < 0 && errno == EINTR) continue;
      if (ready <= 0) continue;
      const ssize_t n = ::read(STDIN_FILENO, buffer.data(), buffer.size());
      if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
      if (n <= 0) {
        Send("", /*close=*/true);
        return;
      }
      if (!Send(buffer.substr(0, static_cast<size_t>(n)), /*close=*/false)) return;
    }
  }

  client::ClusterClient* const client_;
  const std::string job_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

int RunTrain(const TrainArgs& args) {
  auto request = BuildTrainRequest(args);
  if (!request.ok()) return ReportError(request.status());
  const bool forward_stdin = !args.detach && !args.no_stdin && StdinIsInput();
  request->mutable_spec()->set_forward_stdin(forward_stdin);
  SignalWaiter signals;  // before any gRPC thread exists, so they inherit the mask
  auto client = ConnectCluster(args.common);
  if (!client.ok()) return ReportError(client.status());
  client::ClusterClient& c = **client;
  v1::JobStatus submitted;
  absl::Status sent = c.Call(c.HeadPeer(), client::Retry::kSafe, [&](grpc::ClientContext* ctx) {
    return c.jobs().SubmitJob(ctx, *request, &submitted);
  });
  if (!sent.ok()) return ReportError(sent);
  if (args.detach) {
    std::cout << submitted.job_id() << "\n";
    return 0;
  }
  signals.Start([&c, job = submitted.job_id()](int sig) { StopJobOnSignal(&c, job, sig); });
  std::unique_ptr<StdinForwarder> input;
  if (forward_stdin) input = std::make_unique<StdinForwarder>(&c, submitted.job_id());
  auto ended = FollowJobLog(c, submitted.job_id(), -1, /*follow=*/true, /*attach=*/true);
  input.reset();
  signals.Stop();  // its callback uses the client, which goes before it
  if (!ended.ok()) return ReportError(ended.status());
  if (!ended->has_value()) {
    return ReportError(absl::StrCat("job ", submitted.job_id(), " did not say how it ended"));
  }
  return (*ended)->exit_code();
}

}  // namespace

void AddTrainCommand(CLI::App& app, int& exit_code) {
  auto args = std::make_shared<TrainArgs>();
  CLI::App* cmd = app.add_subcommand(
      "train", "Run a training script as one gang of ranks (a drop-in for torchrun)");
  cmd->add_option("--accelerator", args->accelerator, "Whole TPU slices of this type (TPU-V6E)")
      ->type_name("TYPE");
  cmd->add_option("--topology", args->topology, "The slice shape (4x4)")->type_name("SHAPE");
  cmd->add_option("--slices", args->slices, "How many whole slices, or a range MIN:MAX (default 1)")
      ->type_name("K|MIN:MAX");
  cmd->add_flag("--per-chip", args->per_chip, "One rank per chip instead of one per host");
  cmd->add_option("--nvlink-hosts", args->nvlink_hosts,
                  "N hosts of one NVLink domain, one rank each")
      ->type_name("N");
  cmd->add_option("--per-host", args->per_host, "What each slice or NVLink host's rank holds")
      ->type_name("LIST");
  cmd->add_option("--workers", args->workers, "N ranks in one placement group, or a range MIN:MAX")
      ->type_name("N|MIN:MAX");
  cmd->add_option("--resources-per-worker", args->resources_per_worker,
                  "What each rank holds (default CPU=1)")
      ->type_name("LIST");
  cmd->add_option("--strategy", args->strategy,
                  "PACK (default), SPREAD, STRICT_PACK, STRICT_SPREAD")
      ->type_name("S");
  cmd->add_option("--nnodes", args->nnodes, "Nodes, one bundle each, or a range MIN:MAX")
      ->type_name("N|MIN:MAX");
  cmd->add_option("--nproc-per-node", args->nproc_per_node, "Ranks per node (default 1)")
      ->type_name("K");
  cmd->add_option("--resources-per-node", args->resources_per_node,
                  "What each node's bundle holds (default CPU=<nproc-per-node>)")
      ->type_name("LIST");
  cmd->add_option("--label-selector", args->selectors, "Node label selector; repeat for fallbacks")
      ->type_name("EXPR")
      ->allow_extra_args(false);
  cmd->add_option("--max-restarts", args->process.max_restarts,
                  "Group restarts after failures (default 0)")
      ->type_name("K");
  cmd->add_option("--hang-timeout", args->process.hang_timeout,
                  "A rank with no output and no CPU time this long has failed")
      ->type_name("DUR");
  cmd->add_option("--stop-grace", args->process.stop_grace,
                  "SIGTERM to SIGKILL when the gang stops (default 5s)")
      ->type_name("DUR");
  cmd->add_option("--start-timeout", args->start_timeout,
                  "How long each attempt waits for its reservation (default 60s)")
      ->type_name("DUR");
  cmd->add_option("--elastic-check", args->elastic_check,
                  "How often a gang below its maximum looks for room to grow (default 10s)")
      ->type_name("DUR");
  cmd->add_option("--name", args->process.name, "A name for the job")->type_name("NAME");
  cmd->add_option("--env", args->process.env,
                  "NAME=VALUE for every rank, or NAME to pass this shell's value (repeatable)")
      ->type_name("NAME[=VALUE]")
      ->allow_extra_args(false);
  cmd->add_option("--working-dir", args->process.working_dir,
                  "Ship this folder to every host that runs a rank and start the ranks in it")
      ->type_name("DIR");
  cmd->add_flag("--detach", args->detach, "Print the job id and return; the job goes on");
  cmd->add_flag("--no-stdin", args->no_stdin,
                "Do not forward this command's stdin to rank 0 (it is, unless it is /dev/null)");
  AddCommonClusterFlags(*cmd, args->common);
  cmd->add_option("COMMAND", args->process.command, "The script and its arguments, after --")
      ->required();
  cmd->callback([args, &exit_code] { exit_code = RunTrain(*args); });
}

}  // namespace tessera::cli
