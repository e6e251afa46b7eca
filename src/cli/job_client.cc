#include "cli/job_client.h"

#include <google/protobuf/util/json_util.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "base/file_read.h"
#include "base/status_macros.h"
#include "base/string_util.h"
#include "cli/text_table.h"
#include "node/working_dir.h"
#include "rpc/state_names.h"

namespace tessera::cli {
namespace {

// A status.json holds the status as `job status --json` prints it (rpc::MessageJson), its states
// as words: each becomes its enum value's name again, which the proto JSON parser reads. (A word
// of no value, and a name already, stay as they are.)
void StateWordsToNames(nlohmann::json& status) {
  auto rename = [](nlohmann::json& object, const google::protobuf::EnumDescriptor& type) {
    if (!object.is_object()) return;
    auto state = object.find("state");
    if (state == object.end() || !state->is_string()) return;
    if (const auto* value = rpc::StateValueOf(type, state->get<std::string>())) {
      *state = std::string(value->name());
    }
  };
  rename(status, *v1::GangJobState_descriptor());
  auto each = [&](const char* list, const google::protobuf::EnumDescriptor& type) {
    auto items = status.find(list);
    if (items == status.end() || !items->is_array()) return;
    for (nlohmann::json& item : *items) rename(item, type);
  };
  each("phases", *v1::GangJobState_descriptor());
  each("ranks", *v1::RankState_descriptor());
  each("past_ranks", *v1::RankState_descriptor());
}

void WriteAll(int fd, const std::string& data) {
  size_t done = 0;
  while (done < data.size()) {
    const ssize_t n = ::write(fd, data.data() + done, data.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;
    done += static_cast<size_t>(n);
  }
}

bool SafeJobName(const std::string& job) {
  return !job.empty() && job.find('/') == std::string::npos && job != "." && job != "..";
}

}  // namespace

absl::Status ParseCountRange(const std::string& flag, const std::string& text, int* min, int* max) {
  std::vector<std::string> parts = absl::StrSplit(text, ':');
  auto bad = [&] {
    return absl::InvalidArgumentError(
        absl::StrCat(flag, ": ", Quote(text), " is not N or MIN:MAX (whole numbers >= 1)"));
  };
  if (parts.empty() || parts.size() > 2) return bad();
  if (!absl::SimpleAtoi(parts[0], min) || *min < 1) return bad();
  *max = *min;
  if (parts.size() == 2 && (!absl::SimpleAtoi(parts[1], max) || *max < *min)) return bad();
  return absl::OkStatus();
}

absl::Status FillJobProcess(const JobProcessArgs& args, v1::JobSpec* spec) {
  if (args.command.empty()) {
    return absl::InvalidArgumentError("no command given (put it after --: -- python3 train.py)");
  }
  spec->set_name(args.name);
  for (const std::string& arg : args.command) spec->add_argv(arg);
  for (const std::string& pair : args.env) {
    const size_t eq = pair.find('=');
    if (eq == 0 || pair.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("--env: ", Quote(pair), " is not NAME=VALUE or NAME"));
    }
    if (eq == std::string::npos) {
      // A variable of this client's, passed by name.
      const char* value = std::getenv(pair.c_str());
      if (value == nullptr) {
        return absl::InvalidArgumentError(
            absl::StrCat("--env: ", pair, " is not set in this environment"));
      }
      (*spec->mutable_env())[pair] = value;
      continue;
    }
    (*spec->mutable_env())[pair.substr(0, eq)] = pair.substr(eq + 1);
  }
  if (args.max_restarts < 0) return absl::InvalidArgumentError("--max-restarts: must be 0 or more");
  spec->set_max_restarts(args.max_restarts);
  if (!args.hang_timeout.empty()) {
    TESSERA_ASSIGN_OR_RETURN(
        absl::Duration d, client::ParsePositiveDurationFlag("--hang-timeout", args.hang_timeout));
    spec->set_hang_timeout_ms(absl::ToInt64Milliseconds(d));
  }
  if (!args.stop_grace.empty()) {
    TESSERA_ASSIGN_OR_RETURN(absl::Duration d,
                             client::ParseDurationFlag("--stop-grace", args.stop_grace));
    spec->set_stop_grace_ms(std::max<int64_t>(1, absl::ToInt64Milliseconds(d)));
  }
  if (!args.working_dir.empty()) {
    TESSERA_ASSIGN_OR_RETURN(PackedDirectory packed,
                             PackDirectory(args.working_dir, kWorkingDirMaxFileBytes));
    for (const std::string& skipped : packed.skipped) {
      std::cerr << "tessera: warning: --working-dir: " << skipped
                << " is not a regular file or folder; not shipped\n";
    }
    spec->set_working_dir(std::move(packed.archive));
  } else {
    std::error_code ec;
    spec->set_cwd(std::filesystem::current_path(ec).string());
  }
  return absl::OkStatus();
}

std::string JobStatusText(const v1::JobStatus& status) {
  std::ostringstream out;
  out << "job " << status.job_id();
  if (!status.name().empty()) out << " (" << status.name() << ")";
  out << ": " << rpc::GangJobStateName(status.state());
  if (!status.message().empty()) out << ": " << status.message();
  out << "\n";
  out << "command: " << absl::StrJoin(status.argv(), " ") << "\n";
  out << "restarts: " << status.restart_count() << " of " << status.max_restarts();
  if (status.world_size() > 0) out << "; world size " << status.world_size();
  if (!status.reservation().empty()) out << "; reservation " << status.reservation();
  out << "\n";
  if (status.state() == v1::GANG_JOB_STATE_SUCCEEDED ||
      status.state() == v1::GANG_JOB_STATE_FAILED || status.state() == v1::GANG_JOB_STATE_STOPPED) {
    out << "exit code: " << status.exit_code() << "\n";
  }
  if (!status.log_dir().empty()) out << "logs: " << status.log_dir() << "\n";
  if (status.ranks_size() > 0) {
    TextTable table({"RANK", "LOCAL", "NODE", "HOST", "WORKER", "PID", "STATE", "EXIT"});
    for (const v1::RankStatus& r : status.ranks()) {
      table.AddRow({std::to_string(r.rank()), std::to_string(r.local_rank()), r.node_id(), r.host(),
                    r.worker_id(), std::to_string(r.pid()),
                    std::string(rpc::RankStateName(r.state())), r.exit_reason()});
    }
    out << table.Render();
  }
  return out.str();
}

absl::StatusOr<v1::JobStatus> ReadJobStatusFile(const client::StateFolder& state,
                                                const std::string& job) {
  if (!SafeJobName(job))
    return absl::InvalidArgumentError(absl::StrCat(Quote(job), " is not a job id"));
  const std::string path = absl::StrCat(state.JobsDir(), "/", job, "/status.json");
  // Sized before it is read (base/file_read.h).
  absl::StatusOr<std::string> text = ReadFileUpTo(path, kMaxDescriptionFileBytes, "job status");
  if (absl::IsNotFound(text.status())) {
    // A name: the newest job of that name.
    std::optional<v1::JobStatus> newest;
    for (const v1::JobStatus& s : ReadJobStatusFiles(state)) {
      if (s.name() == job && (!newest || s.submit_time_ms() >= newest->submit_time_ms()))
        newest = s;
    }
    if (newest) return *newest;
    return absl::NotFoundError(absl::StrCat("no job ", job, " (no ", path, ")"));
  }
  if (!text.ok()) return text.status();
  nlohmann::json json = nlohmann::json::parse(*text, nullptr, /*allow_exceptions=*/false);
  if (!json.is_object()) return absl::DataLossError(absl::StrCat(path, " is not a job status"));
  StateWordsToNames(json);
  v1::JobStatus status;
  google::protobuf::util::JsonParseOptions parse;
  parse.ignore_unknown_fields = true;
  const std::string names =
      json.dump(-1, ' ', /*ensure_ascii=*/false, nlohmann::json::error_handler_t::replace);
  if (!google::protobuf::util::JsonStringToMessage(names, &status, parse).ok()) {
    return absl::DataLossError(absl::StrCat(path, " is not a job status"));
  }
  return status;
}

std::vector<v1::JobStatus> ReadJobStatusFiles(const client::StateFolder& state) {
  std::vector<v1::JobStatus> jobs;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(state.JobsDir(), ec)) {
    const std::string id = entry.path().filename().string();
    if (!std::filesystem::exists(entry.path() / "status.json", ec)) continue;
    auto status = ReadJobStatusFile(state, id);
    if (status.ok()) jobs.push_back(*status);
  }
  std::sort(jobs.begin(), jobs.end(), [](const v1::JobStatus& a, const v1::JobStatus& b) {
    return a.submit_time_ms() < b.submit_time_ms();
  });
  return jobs;
}

absl::StatusOr<std::optional<v1::JobStatus>> FollowJobLog(client::ClusterClient& client,
                                                          const std::string& job, int rank,
                                                          bool follow, bool attach) {
  v1::StreamJobLogsRequest request;
  request.set_job_id(job);
  request.set_rank(rank);
  request.set_follow(follow);
  request.set_attach(attach);
  uint64_t offset = 0;
  std::optional<v1::JobStatus> ended;
  // A stream cut by a transient failure is taken up again where it stopped.
  for (int attempt = 0; attempt < 5; ++attempt) {
    request.set_offset(offset);
    auto context = client.StreamContext();
    auto stream = client.jobs().StreamJobLogs(context.get(), request);
    v1::JobLogChunk chunk;
    while (stream->Read(&chunk)) {
      if (!chunk.data().empty()) {
        WriteAll(chunk.is_stderr() ? STDERR_FILENO : STDOUT_FILENO, chunk.data());
        offset += chunk.data().size();
      }
      if (chunk.has_ended()) ended = chunk.ended();
    }
    const grpc::Status finished = stream->Finish();
    if (finished.ok()) return ended;
    if (finished.error_code() != grpc::StatusCode::UNAVAILABLE || !follow) {
      return client::FromGrpc(finished, client.HeadPeer());
    }
    absl::SleepFor(absl::Milliseconds(200));
  }
  return absl::UnavailableError(
      absl::StrCat("lost the log stream of job ", job, " from ", client.HeadPeer()));
}

absl::Status PrintJobLogFile(const client::StateFolder& state, const std::string& job, int rank) {
  std::string id = job;
  if (!SafeJobName(job))
    return absl::InvalidArgumentError(absl::StrCat(Quote(job), " is not a job id"));
  if (!std::filesystem::exists(absl::StrCat(state.JobsDir(), "/", job))) {
    auto status = ReadJobStatusFile(state, job);  // a job name
    if (!status.ok()) return status.status();
    id = status->job_id();
  }
  const std::string path = rank >= 0
                               ? absl::StrCat(state.JobsDir(), "/", id, "/rank-", rank, ".log")
                               : absl::StrCat(state.JobsDir(), "/", id, "/job.log");
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat("no log ", path));
  // In pieces: a job's log may be larger than this process's memory.
  std::string piece(1 << 16, '\0');
  while (in.read(piece.data(), static_cast<std::streamsize>(piece.size())) || in.gcount() > 0) {
    WriteAll(STDOUT_FILENO, piece.substr(0, static_cast<size_t>(in.gcount())));
  }
  return absl::OkStatus();
}

}  // namespace tessera::cli
