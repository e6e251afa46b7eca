// What `tessera train` and `tessera job ...` share: building a JobSpec from their flags, printing
// a job's status, following its log, and reading a job's files when no head answers (the logs
// outlive the cluster: <state>/jobs/<job-id>/, docs/train.md).
//
// Thread-compatible: plain functions over the caller's values.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "client/cluster_client.h"
#include "client/state_folder.h"
#include "tessera/v1/jobs.pb.h"

namespace tessera::cli {

// The flags of a job's process side, shared by train and job submit.
struct JobProcessArgs {
  std::string name;
  std::vector<std::string> env;  // NAME=VALUE, or NAME: this client's value
  std::string working_dir;
  int max_restarts = 0;
  std::string hang_timeout;
  std::string stop_grace;
  std::vector<std::string> command;
};

// Fills the spec's name, argv, env, cwd (this folder), working directory (packed), restarts and
// timeouts. One-line InvalidArgument naming the flag.
absl::Status FillJobProcess(const JobProcessArgs& args, v1::JobSpec* spec);

// "N" or "MIN:MAX" (MIN <= MAX, both >= 1).
absl::Status ParseCountRange(const std::string& flag, const std::string& text, int* min, int* max);

// The job's status as text lines (as JSON: MessageJson, cluster_format.h).
std::string JobStatusText(const v1::JobStatus& status);

// The job's status.json in the state folder, for a job of a cluster that is gone.
absl::StatusOr<v1::JobStatus> ReadJobStatusFile(const client::StateFolder& state,
                                                const std::string& job);
// Every job with a folder in the state folder.
std::vector<v1::JobStatus> ReadJobStatusFiles(const client::StateFolder& state);

// Streams the job's merged log (or one rank's) to stdout/stderr as the head sends it; with
// `follow`, until the job ends, and then returns its final status. `attach` makes this stream
// the job's client (see tessera.v1.Jobs.StreamJobLogs).
absl::StatusOr<std::optional<v1::JobStatus>> FollowJobLog(client::ClusterClient& client,
                                                          const std::string& job, int rank,
                                                          bool follow, bool attach);

// Prints the job's log files as they are on disk (a cluster that is gone).
absl::Status PrintJobLogFile(const client::StateFolder& state, const std::string& job, int rank);

}  // namespace tessera::cli
