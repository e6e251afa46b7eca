// tessera timeline [JOB] [-o FILE]
// Writes a job's timeline in the Chrome trace format (timeline/chrome_trace.h), which Perfetto
// (https://ui.perfetto.dev) and chrome://tracing open: its task runs and actor calls as their
// drivers reported them (HeadJobs.GetTaskEvents), and, for a gang job (`tessera train`,
// `tessera job submit`), its phases and every attempt of its ranks (Jobs.GetJob). JOB is a gang
// job's id or name, a `tessera run` job's id, or a driver's job id
// (tessera.get_runtime_context().get_job_id()); none: the job whose runs the head heard of last.
// FILE "-" is standard output; by default timeline-<job>.json in this folder (mode 0644). Says on
// stderr how many events it wrote and how many runs the head did not have.
#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <iostream>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "cli/cluster_args.h"
#include "cli/commands.h"
#include "client/cluster_client.h"
#include "timeline/chrome_trace.h"

namespace tessera::cli {
namespace {

struct TimelineArgs {
  CommonClusterArgs common;
  std::string job;
  std::string output;
};

// Every run the head has of `job` ("" : the last reporter's); NotFound when it has none.
absl::StatusOr<timeline::TimelineInput> FetchTaskRuns(client::ClusterClient& client,
                                                      const std::string& job) {
  timeline::TimelineInput input;
  int64_t after = 0;
  while (true) {
    tessera::v1::GetTaskEventsRequest request;
    request.set_job_id(job);
    request.set_after(after);
    tessera::v1::GetTaskEventsResponse response;
    absl::Status got =
        client.Call(client.HeadPeer(), client::Retry::kSafe, [&](grpc::ClientContext* c) {
          return client.head_jobs().GetTaskEvents(c, request, &response);
        });
    if (!got.ok()) return got;
    input.job_id = response.job_id();
    input.dropped = response.dropped();
    for (tessera::v1::TaskEvent& event : *response.mutable_events()) {
      input.tasks.push_back(std::move(event));
    }
    if (!response.more()) return input;
    after = response.next();
  }
}

absl::Status WriteFile(const std::string& path, const std::string& text) {
  const int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0644);
  if (fd < 0)
    return absl::UnavailableError(absl::StrCat("cannot write ", path, ": ", std::strerror(errno)));
  size_t written = 0;
  while (written < text.size()) {
    const ssize_t n = write(fd, text.data() + written, text.size() - written);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const int saved = errno;
      close(fd);
      return absl::UnavailableError(
          absl::StrCat("cannot write ", path, ": ", std::strerror(saved)));
    }
    written += static_cast<size_t>(n);
  }
  if (close(fd) != 0) {
    return absl::UnavailableError(absl::StrCat("cannot write ", path, ": ", std::strerror(errno)));
  }
  return absl::OkStatus();
}

int RunTimeline(const TimelineArgs& args) {
  auto client = ConnectCluster(args.common);
  if (!client.ok()) return ReportError(client.status());
  // A gang job by id or name: its phases and ranks, and its id for the runs.
  std::optional<tessera::v1::JobStatus> gang;
  std::string job = args.job;
  if (!job.empty()) {
    tessera::v1::GetJobRequest request;
    request.set_job_id(job);
    tessera::v1::JobStatus status;
    absl::Status got = (*client)->Call(
        (*client)->HeadPeer(), client::Retry::kSafe,
        [&](grpc::ClientContext* c) { return (*client)->jobs().GetJob(c, request, &status); });
    if (got.ok()) {
      gang = std::move(status);
      job = gang->job_id();
    } else if (!absl::IsNotFound(got)) {
      return ReportError(got);
    }
  }
  auto runs = FetchTaskRuns(**client, job);
  if (!runs.ok() && !(absl::IsNotFound(runs.status()) && gang.has_value())) {
    if (absl::IsNotFound(runs.status()) && !job.empty()) {
      return ReportError(
          absl::StrCat("no job ", job,
                       " is known to the head: it is not a gang job (tessera job list) and no "
                       "driver reported task runs of it (tessera list jobs)"));
    }
    return ReportError(runs.status());
  }
  timeline::TimelineInput input = runs.ok() ? *std::move(runs) : timeline::TimelineInput{};
  if (input.job_id.empty()) input.job_id = job;
  input.gang = std::move(gang);
  input.now = absl::Now();
  const nlohmann::json trace = timeline::ChromeTrace(input);
  const std::string text = trace.dump() + "\n";
  const std::string path =
      args.output.empty() ? absl::StrCat("timeline-", input.job_id, ".json") : args.output;
  if (path == "-") {
    std::cout << text;
    std::cout.flush();
  } else if (absl::Status written = WriteFile(path, text); !written.ok()) {
    return ReportError(written);
  }
  std::cerr << "tessera: " << timeline::CountTraceEvents(trace) << " events of job " << input.job_id
            << (path == "-" ? "" : absl::StrCat(" written to ", path))
            << " (open it in https://ui.perfetto.dev or chrome://tracing)";
  if (input.dropped > 0) std::cerr << "; " << input.dropped << " task runs were not kept";
  std::cerr << "\n";
  return 0;
}

}  // namespace

void AddTimelineCommand(CLI::App& app, int& exit_code) {
  auto args = std::make_shared<TimelineArgs>();
  CLI::App* cmd = app.add_subcommand(
      "timeline", "Write a job's task runs and gang phases as a Chrome trace (Perfetto opens it)");
  cmd->add_option("job", args->job,
                  "A gang job's id or name, or a job id (default: the last job with task runs)");
  cmd->add_option("-o,--output", args->output,
                  "The file to write (\"-\": standard output; default timeline-<job>.json)");
  AddCommonClusterFlags(*cmd, args->common);
  cmd->callback([args, &exit_code] { exit_code = RunTimeline(*args); });
}

}  // namespace tessera::cli
