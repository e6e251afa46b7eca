// tessera job submit [--name N] [--env K=V|K]... [--working-dir DIR] [--max-restarts K]
//                    [--resources R] [--hang-timeout DUR] -- CMD ARGS...
// tessera job list [--json] | status JOB [--json] | logs JOB [--rank R] [--follow] | stop JOB
// Jobs owned by the cluster (docs/train.md): `submit` hands a command to the head, which runs it
// as a one-process job (restarted up to --max-restarts times), prints its id and returns. The
// other commands read or stop jobs by id or name; `logs`, `status` and `list` also read a gone
// cluster's job folders (<state>/jobs), which `tessera down` keeps.
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "cli/cluster_args.h"
#include "cli/cluster_format.h"
#include "cli/commands.h"
#include "cli/job_client.h"
#include "cli/text_table.h"
#include "client/cluster_client.h"
#include "resources/resource_set.h"
#include "rpc/state_names.h"
#include "wire/proto_convert.h"

namespace tessera::cli {
namespace {

struct SubmitArgs {
  JobProcessArgs process;
  std::string resources = "CPU=1";
};

struct JobArgs {
  CommonClusterArgs common;
  std::string job;
  bool json = false;
  int rank = -1;
  bool follow = false;
};

// The head, or nullptr with the reason when no cluster answers (then the job folders are read).
std::unique_ptr<client::ClusterClient> TryConnect(const CommonClusterArgs& common,
                                                  absl::Status* why) {
  auto client = ConnectCluster(common);
  if (!client.ok()) {
    *why = client.status();
    return nullptr;
  }
  return *std::move(client);
}

bool NoHead(const absl::Status& status) {
  return absl::IsUnavailable(status) || absl::IsNotFound(status) ||
         absl::IsDeadlineExceeded(status) || absl::IsFailedPrecondition(status);
}

// The state folder whose job files are read when no head answers (only when it may be trusted).
absl::StatusOr<client::StateFolder> StateOf(const CommonClusterArgs& common) {
  return client::TrustedStateFolder(common.state_dir);
}

int RunSubmit(const CommonClusterArgs& common, const SubmitArgs& args) {
  v1::SubmitJobRequest request;
  request.set_request_id(client::NewRequestId("job"));
  v1::JobSpec& spec = *request.mutable_spec();
  auto resources = ParseResourceSet(args.resources);
  if (!resources.ok()) {
    return ReportError(absl::StrCat("--resources: ", resources.status().message()));
  }
  v1::GangPlacement& placement = *spec.mutable_placement();
  placement.set_min_workers(1);
  placement.set_max_workers(1);
  *placement.mutable_resources_per_worker() = wire::ResourcesToProto(*resources);
  if (absl::Status s = FillJobProcess(args.process, &spec); !s.ok()) return ReportError(s);
  auto client = ConnectCluster(common);
  if (!client.ok()) return ReportError(client.status());
  client::ClusterClient& c = **client;
  v1::JobStatus status;
  absl::Status sent = c.Call(c.HeadPeer(), client::Retry::kSafe, [&](grpc::ClientContext* ctx) {
    return c.jobs().SubmitJob(ctx, request, &status);
  });
  if (!sent.ok()) return ReportError(sent);
  std::cout << status.job_id() << "\n";
  return 0;
}

absl::StatusOr<v1::JobStatus> GetJob(client::ClusterClient& c, const std::string& job) {
  v1::GetJobRequest request;
  request.set_job_id(job);
  v1::JobStatus status;
  absl::Status got = c.Call(c.HeadPeer(), client::Retry::kSafe, [&](grpc::ClientContext* ctx) {
    return c.jobs().GetJob(ctx, request, &status);
  });
  if (!got.ok()) return got;
  return status;
}

int RunStatus(const JobArgs& args) {
  absl::Status why;
  std::unique_ptr<client::ClusterClient> client = TryConnect(args.common, &why);
  absl::StatusOr<v1::JobStatus> status =
      client != nullptr ? GetJob(*client, args.job) : absl::StatusOr<v1::JobStatus>(why);
  if (!status.ok() && NoHead(status.status())) {
    auto state = StateOf(args.common);
    status = state.ok() ? ReadJobStatusFile(*state, args.job) : state.status();
  }
  if (!status.ok()) return ReportError(status.status());
  std::cout << (args.json ? MessageJson(*status).dump() + "\n" : JobStatusText(*status));
  return 0;
}

int RunList(const JobArgs& args) {
  absl::Status why;
  std::unique_ptr<client::ClusterClient> client = TryConnect(args.common, &why);
  std::vector<v1::JobStatus> jobs;
  if (client == nullptr && !NoHead(why)) return ReportError(why);
  bool from_files = client == nullptr;
  if (client != nullptr) {
    v1::JobList list;
    absl::Status listed =
        client->Call(client->HeadPeer(), client::Retry::kSafe, [&](grpc::ClientContext* ctx) {
          return client->jobs().ListGangJobs(ctx, v1::ListRequest(), &list);
        });
    if (!listed.ok() && !NoHead(listed)) return ReportError(listed);
    from_files = !listed.ok();
    jobs.assign(list.jobs().begin(), list.jobs().end());
  }
  if (from_files) {
    auto state = StateOf(args.common);
    if (!state.ok()) return ReportError(state.status());
    jobs = ReadJobStatusFiles(*state);
  }
  if (args.json) {
    nlohmann::ordered_json list = nlohmann::ordered_json::array();
    for (const v1::JobStatus& job : jobs) list.push_back(MessageJson(job));
    std::cout << list.dump() << "\n";
    return 0;
  }
  TextTable table({"JOB", "NAME", "STATE", "RANKS", "RESTARTS", "MESSAGE"});
  for (const v1::JobStatus& job : jobs) {
    table.AddRow({job.job_id(), job.name(), std::string(rpc::GangJobStateName(job.state())),
                  std::to_string(job.world_size()),
                  absl::StrCat(job.restart_count(), "/", job.max_restarts()), job.message()});
  }
  if (table.empty()) {
    std::cout << "No jobs.\n";
  } else {
    std::cout << table.Render(0);
  }
  return 0;
}

int RunLogs(const JobArgs& args) {
  if (args.rank < -1) return ReportError("--rank: a rank number (0 or more)");
  absl::Status why;
  std::unique_ptr<client::ClusterClient> client = TryConnect(args.common, &why);
  if (client != nullptr) {
    auto followed = FollowJobLog(*client, args.job, args.rank, args.follow, /*attach=*/false);
    if (followed.ok()) return 0;
    if (!NoHead(followed.status())) return ReportError(followed.status());
  }
  auto state = StateOf(args.common);
  if (!state.ok()) return ReportError(state.status());
  if (absl::Status s = PrintJobLogFile(*state, args.job, args.rank); !s.ok()) return ReportError(s);
  return 0;
}

int RunJobStop(const JobArgs& args) {
  auto client = ConnectCluster(args.common);
  if (!client.ok()) return ReportError(client.status());
  client::ClusterClient& c = **client;
  v1::StopJobRequest request;
  request.set_job_id(args.job);
  v1::JobStatus status;
  absl::Status stopped = c.Call(c.HeadPeer(), client::Retry::kSafe, [&](grpc::ClientContext* ctx) {
    ctx->set_deadline(std::chrono::system_clock::now() + std::chrono::minutes(3));
    return c.jobs().StopJob(ctx, request, &status);
  });
  if (!stopped.ok()) return ReportError(stopped);
  std::cout << "job " << status.job_id() << ": " << rpc::GangJobStateName(status.state())
            << (status.message().empty() ? "" : ": ") << status.message() << "\n";
  return 0;
}

}  // namespace

void AddJobCommand(CLI::App& app, int& exit_code) {
  CLI::App* job =
      app.add_subcommand("job", "Jobs owned by the cluster: submit, list, status, logs, stop");
  job->require_subcommand(1);

  auto common = std::make_shared<CommonClusterArgs>();
  auto submit = std::make_shared<SubmitArgs>();
  CLI::App* s =
      job->add_subcommand("submit", "Run a command as a job of the cluster; print its id");
  s->add_option("--name", submit->process.name, "A name for the job")->type_name("NAME");
  s->add_option("--env", submit->process.env,
                "NAME=VALUE for the job, or NAME to pass this shell's value (repeatable)")
      ->type_name("NAME[=VALUE]")
      ->allow_extra_args(false);
  s->add_option("--working-dir", submit->process.working_dir,
                "Ship this folder to the job's host and start the job in it")
      ->type_name("DIR");
  s->add_option("--max-restarts", submit->process.max_restarts, "Restarts after failures")
      ->type_name("K");
  s->add_option("--resources", submit->resources, "What the job holds (default CPU=1)")
      ->type_name("LIST");
  s->add_option("--hang-timeout", submit->process.hang_timeout,
                "No output and no CPU time this long is a failure")
      ->type_name("DUR");
  AddCommonClusterFlags(*s, *common);
  s->add_option("COMMAND", submit->process.command, "The command, after --")->required();
  s->callback([common, submit, &exit_code] { exit_code = RunSubmit(*common, *submit); });

  auto add = [&](const char* name, const char* help, auto run, bool takes_job) {
    auto args = std::make_shared<JobArgs>();
    CLI::App* cmd = job->add_subcommand(name, help);
    if (takes_job) cmd->add_option("JOB", args->job, "The job's id or name")->required();
    AddCommonClusterFlags(*cmd, args->common);
    cmd->callback([args, run, &exit_code] { exit_code = run(*args); });
    return std::make_pair(cmd, args);
  };
  auto [list, list_args] = add("list", "The cluster's jobs", RunList, false);
  list->add_flag("--json", list_args->json, "As JSON");
  auto [status, status_args] = add("status", "A job's state, restarts and ranks", RunStatus, true);
  status->add_flag("--json", status_args->json, "As JSON");
  auto [logs, logs_args] = add("logs", "A job's merged log (or one rank's)", RunLogs, true);
  logs->add_option("--rank", logs_args->rank, "Only this rank's output")->type_name("R");
  logs->add_flag("--follow,-f", logs_args->follow, "Keep printing until the job ends");
  add("stop", "Stop a job: its gang is stopped and its reservation released", RunJobStop, true);
}

}  // namespace tessera::cli
