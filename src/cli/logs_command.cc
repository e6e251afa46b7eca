// tessera logs WORKER_ID [--follow] [--stderr]
// Prints a worker's stdout (or its stderr) as the node agent that ran it kept it; --follow keeps
// printing what the worker writes until it exits. The worker is found by asking every alive node
// agent for its workers.
#include <unistd.h>

#include <iostream>
#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/string_util.h"
#include "cli/cluster_args.h"
#include "cli/commands.h"
#include "client/cluster_client.h"

namespace tessera::cli {
namespace {

struct LogsArgs {
  CommonClusterArgs common;
  std::string worker_id;
  bool follow = false;
  bool stderr_stream = false;
};

int RunLogs(const LogsArgs& args) {
  auto client = ConnectCluster(args.common);
  if (!client.ok()) return ReportError(client.status());
  client::ClusterClient& c = **client;
  std::vector<std::string> unreachable;
  auto workers = c.ListWorkersEverywhere(unreachable);
  if (!workers.ok()) return ReportError(workers.status());
  std::string node_id;
  for (const auto& node : *workers) {
    for (const auto& w : node.workers()) {
      if (w.worker_id() == args.worker_id) node_id = node.node_id();
    }
  }
  if (node_id.empty()) {
    std::string message = absl::StrCat("no worker ", Quote(args.worker_id), " on any node");
    if (!unreachable.empty()) {
      absl::StrAppend(&message, " that answered (not answering: ", absl::StrJoin(unreachable, "; "),
                      ")");
    }
    return ReportError(message);
  }
  auto nodes = c.ListNodes();
  if (!nodes.ok()) return ReportError(nodes.status());
  std::string address;
  for (const auto& n : nodes->nodes()) {
    if (n.node().node_id() == node_id) address = n.node().address();
  }

  tessera::v1::ReadLogsRequest request;
  request.set_worker_id(args.worker_id);
  request.set_follow(args.follow);
  request.set_stderr_only(args.stderr_stream);
  request.set_stdout_only(!args.stderr_stream);
  auto context = c.StreamContext();
  auto stream = c.agent(address).ReadLogs(context.get(), request);
  tessera::v1::LogChunk chunk;
  while (stream->Read(&chunk)) {
    const std::string& data = chunk.data();
    size_t done = 0;
    while (done < data.size()) {
      const ssize_t n = write(STDOUT_FILENO, data.data() + done, data.size() - done);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) return 0;  // the reader closed the pipe (e.g. `| head`)
      done += static_cast<size_t>(n);
    }
  }
  const absl::Status status =
      client::FromGrpc(stream->Finish(), absl::StrCat("node ", node_id, " at ", address));
  if (!status.ok()) return ReportError(status);
  return 0;
}

}  // namespace

void AddLogsCommand(CLI::App& app, int& exit_code) {
  auto args = std::make_shared<LogsArgs>();
  CLI::App* cmd = app.add_subcommand("logs", "Print a worker's output");
  cmd->add_option("WORKER_ID", args->worker_id, "The worker (see tessera list workers)")
      ->required();
  cmd->add_flag("--follow,-f", args->follow, "Keep printing until the worker exits");
  cmd->add_flag("--stderr", args->stderr_stream, "Print its standard error instead of its output");
  AddCommonClusterFlags(*cmd, args->common);
  cmd->callback([args, &exit_code] { exit_code = RunLogs(*args); });
}

}  // namespace tessera::cli
