// HeadHttp (head_http.h): routes onto the services' own handlers, their answers through
// rpc::MessageJson; the metrics are callback gauges over one GetClusterStatus per scrape.
#include "head/head_http.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <functional>
#include <map>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "base/ignore_status.h"
#include "base/status_macros.h"
#include "hardware/node_label_keys.h"
#include "head/head_service_internal.h"
#include "metrics/metrics_endpoint.h"
#include "metrics/static_file_handler.h"
#include "resources/quantity.h"
#include "rpc/message_json.h"
#include "rpc/state_names.h"
#include "rpc/status_conversion.h"

namespace tessera {
namespace {

using Json = nlohmann::ordered_json;
using head_internal::AllPages;
using metrics::HttpRequest;
using metrics::HttpResponse;
using metrics::TextResponse;

constexpr size_t kMaxLogChunk = 256 * 1024;
// A node list of 1,000 nodes answers about 2.6 MB, built at a peak of tens of MiB of small blocks
// per HTTP thread; past this size the thread gives the freed memory back.
constexpr size_t kReleaseMemoryAfterBytes = 1 << 20;

HttpResponse JsonResponse(const Json& json) {
  return HttpResponse{200, "application/json", json.dump(), {{"Cache-Control", "no-cache"}}};
}

HttpResponse FromGrpc(const grpc::Status& status) {
  const int code = status.error_code() == grpc::StatusCode::NOT_FOUND          ? 404
                   : status.error_code() == grpc::StatusCode::INVALID_ARGUMENT ? 400
                                                                               : 500;
  return TextResponse(code, status.error_message());
}

// A job id or node id as a path segment: the characters ids are made of, nothing that walks.
bool SafeId(std::string_view id) {
  if (id.empty() || id.size() > 256 || id == "." || id == "..") return false;
  return std::all_of(id.begin(), id.end(), [](char c) {
    return absl::ascii_isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.';
  });
}

// Reads up to kMaxLogChunk bytes of `path` from `offset` (never following a symlink).
absl::StatusOr<std::pair<std::string, int64_t>> ReadFrom(const std::string& path, int64_t offset) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0) {
    if (errno == ENOENT) return std::make_pair(std::string(), offset);  // nothing written yet
    return absl::UnavailableError(absl::StrCat("cannot open ", path));
  }
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    return absl::FailedPreconditionError(absl::StrCat(path, " is not a regular file"));
  }
  std::string data;
  if (offset < st.st_size) {
    data.resize(std::min<int64_t>(kMaxLogChunk, st.st_size - offset));
    const ssize_t n = ::pread(fd, data.data(), data.size(), offset);
    data.resize(n > 0 ? static_cast<size_t>(n) : 0);
  }
  ::close(fd);
  return std::make_pair(std::move(data), offset + static_cast<int64_t>(data.size()));
}

Json SampleJson(const v1::DeviceSample& s) {
  Json out = {{"time_ms", s.time_ms()}};
  if (s.has_utilization()) out["utilization"] = s.utilization();
  if (s.has_duty_cycle()) out["duty_cycle"] = s.duty_cycle();
  if (s.has_sm_activity()) out["sm_activity"] = s.sm_activity();
  if (s.has_tensor_activity()) out["tensorcore_activity"] = s.tensor_activity();
  if (s.has_memory_bandwidth()) out["memory_bandwidth"] = s.memory_bandwidth();
  if (s.has_memory_used_bytes()) out["memory_used_bytes"] = s.memory_used_bytes();
  if (s.has_memory_total_bytes()) out["memory_total_bytes"] = s.memory_total_bytes();
  if (s.has_power_watts()) out["power_watts"] = s.power_watts();
  if (s.has_temperature_celsius()) out["temperature_celsius"] = s.temperature_celsius();
  return out;
}

// /api/v1/nodes/<id> and /api/v1/nodes/<id>/telemetry.
HttpResponse NodePage(HeadService* head, const HttpRequest& request) {
  const std::vector<std::string> parts =
      absl::StrSplit(request.path.substr(std::string_view("/api/v1/nodes/").size()), '/');
  const bool one_node = parts.size() == 1;
  if (!SafeId(parts[0]) || !(one_node || (parts.size() == 2 && parts[1] == "telemetry"))) {
    return TextResponse(404,
                        "no such page: /api/v1/nodes/<node-id> and /api/v1/nodes/<node-id>/"
                        "telemetry are served");
  }
  const std::string& node_id = parts[0];
  const std::optional<v1::NodeInfo> node = head->NodeInfoOf(node_id);
  if (one_node) {
    return JsonResponse(Json{{"node", node.has_value() ? rpc::MessageJson(*node) : Json(nullptr)}});
  }
  if (!node.has_value()) return TextResponse(404, absl::StrCat("no node ", node_id));
  std::string type;
  if (auto it = node->node().labels().find(std::string(labels::kAcceleratorType));
      it != node->node().labels().end()) {
    type = it->second;
  }
  Json devices = Json::array();
  for (const auto& [key, history] : head->device_history().Get(node_id)) {
    Json samples = Json::array();
    for (const v1::DeviceSample& sample : history) samples.push_back(SampleJson(sample));
    devices.push_back({{"resource", key.first},
                       {"index", key.second},
                       {"type", type},
                       {"samples", std::move(samples)}});
  }
  return JsonResponse(Json{{"node_id", node_id}, {"devices", std::move(devices)}});
}

// /api/v1/jobs/<id>/logs?rank=R&offset=N: a chunk of the job's log, or of one rank's, in `dir`.
HttpResponse JobLogPage(train::JobManager* jobs, const std::string& dir,
                        const HttpRequest& request) {
  const std::vector<std::string> parts =
      absl::StrSplit(request.path.substr(std::string_view("/api/v1/jobs/").size()), '/');
  if (parts.size() != 2 || parts[1] != "logs" || !SafeId(parts[0])) {
    return TextResponse(404, "no such page: /api/v1/jobs/<job-id>/logs is served");
  }
  int64_t rank = -1;
  int64_t offset = 0;
  if (auto text = request.QueryValue("rank");
      text.has_value() && !text->empty() &&
      !absl::SimpleAtoi(absl::string_view(text->data(), text->size()), &rank)) {
    return TextResponse(400, "rank: not a number");
  }
  if (auto text = request.QueryValue("offset");
      text.has_value() && !text->empty() &&
      (!absl::SimpleAtoi(absl::string_view(text->data(), text->size()), &offset) || offset < 0)) {
    return TextResponse(400, "offset: not a byte offset");
  }
  v1::GetJobRequest get;
  get.set_job_id(parts[0]);
  v1::JobStatus status;
  grpc::Status got = jobs->GetJob(nullptr, &get, &status);
  if (!got.ok()) return FromGrpc(got);
  const std::string file = rank < 0 ? "job.log" : absl::StrCat("rank-", rank, ".log");
  auto read = ReadFrom(absl::StrCat(dir, "/", parts[0], "/", file), offset);
  if (!read.ok()) return TextResponse(500, std::string(read.status().message()));
  const bool ended = status.end_time_ms() > 0;
  const bool done = ended && read->first.size() < kMaxLogChunk;
  return JsonResponse(Json{{"data", read->first}, {"next_offset", read->second}, {"done", done}});
}

// One GetClusterStatus serves every family of a scrape (they are collected one after another):
// a status younger than a second is reused.
struct ClusterStatusSnapshot {
  absl::Mutex mu;
  absl::Time taken ABSL_GUARDED_BY(mu) = absl::InfinitePast();
  v1::ClusterStatus status ABSL_GUARDED_BY(mu);
};

// The cluster's status as the head answers GetClusterStatus, at most a second old.
std::function<v1::ClusterStatus()> CachedClusterStatus(HeadService* head) {
  auto snapshot = std::make_shared<ClusterStatusSnapshot>();
  return [head, snapshot]() {
    absl::MutexLock lock(&snapshot->mu);
    if (head->clock()->Now() - snapshot->taken > absl::Seconds(1)) {
      v1::ListRequest request;
      snapshot->status.Clear();
      IgnoreStatus(
          rpc::FromGrpcStatus(head->admin().GetClusterStatus(nullptr, &request, &snapshot->status)),
          "cannot fail: the head's own status call always answers OK");
      snapshot->taken = head->clock()->Now();
    }
    return snapshot->status;
  };
}

}  // namespace

std::string FindDashboardDir() {
  std::error_code ec;
  const std::filesystem::path bin =
      std::filesystem::read_symlink("/proc/self/exe", ec).parent_path();
  for (const std::filesystem::path& candidate :
       {bin / ".." / "share" / "tessera" / "dashboard",
        std::filesystem::path(TESSERA_SOURCE_DIR) / "web" / "dashboard"}) {
    if (std::filesystem::is_regular_file(candidate / "index.html", ec)) {
      return std::filesystem::weakly_canonical(candidate, ec).string();
    }
  }
  return "";
}

absl::StatusOr<std::unique_ptr<HeadHttp>> HeadHttp::Start(HeadHttpOptions options) {
  if (options.service == nullptr || options.jobs == nullptr) {
    return absl::InvalidArgumentError("HeadHttp needs the head's service and job manager");
  }
  std::unique_ptr<HeadHttp> http(new HeadHttp());
  http->options_ = std::move(options);
  if (http->options_.registry != nullptr) http->registry_ = http->options_.registry;
  metrics::HttpServerOptions server;
  server.host = http->options_.host;
  server.port = http->options_.port;
  server.bearer_token = http->options_.bearer_token;
  server.scrape_token = http->options_.scrape_token;
  http->sessions_ = std::make_shared<metrics::HttpSessions>();
  server.sessions = http->sessions_;
  server.release_memory_after_bytes = kReleaseMemoryAfterBytes;
  TESSERA_ASSIGN_OR_RETURN(http->server_, metrics::HttpServer::Start(std::move(server)));
  TESSERA_RETURN_IF_ERROR(http->RegisterMetrics());
  TESSERA_RETURN_IF_ERROR(http->AddRoutes());
  return http;
}

HeadHttp::~HeadHttp() { Stop(); }

void HeadHttp::Stop() {
  if (server_ != nullptr) server_->Stop();
}

absl::Status HeadHttp::Handle(std::string path, metrics::HttpHandler handler) {
  return server_->Handle(std::move(path), std::move(handler));
}

absl::Status HeadHttp::AddRoutes() {
  HeadService* head = options_.service;
  train::JobManager* jobs = options_.jobs;
  metrics::HttpServer& server = *server_;
  TESSERA_RETURN_IF_ERROR(server.Handle("/metrics", metrics::PrometheusMetricsHandler(*registry_),
                                        {.access = metrics::HttpAccess::kMetrics}));

  // The dashboard's login: a ticket the head issues over gRPC to whoever proves the token
  // (HeadAdminService::CreateDashboardLogin, `tessera dashboard`), spent once by the page for a
  // session.
  const std::shared_ptr<metrics::HttpSessions> sessions = sessions_;
  TESSERA_RETURN_IF_ERROR(server.Handle(
      "/api/v1/sessions",
      [sessions](const HttpRequest& request) {
        const std::optional<std::string_view> ticket = request.Header("x-tessera-login-ticket");
        if (!ticket.has_value()) {
          return TextResponse(400, "send the login ticket as \"X-Tessera-Login-Ticket: <ticket>\"");
        }
        absl::StatusOr<std::string> session = sessions->Redeem(*ticket);
        if (!session.ok()) return TextResponse(403, std::string(session.status().message()));
        return JsonResponse(
            Json{{"session", *session},
                 {"expires_in_s", absl::ToInt64Seconds(sessions->options().session_lifetime)}});
      },
      {.access = metrics::HttpAccess::kPublic, .allow_post = true}));

  TESSERA_RETURN_IF_ERROR(AddListRoutes());
  // /api/v1/nodes/<id> (one node: {"node": NodeInfo}, or {"node": null} when the head lists no
  // such node, so that a page asking for it has no failed load to report) and
  // /api/v1/nodes/<id>/telemetry.
  TESSERA_RETURN_IF_ERROR(server.HandlePrefix(
      "/api/v1/nodes/", [head](const HttpRequest& request) { return NodePage(head, request); }));
  // /api/v1/jobs/<id>/logs?rank=R&offset=N
  TESSERA_RETURN_IF_ERROR(server.HandlePrefix(
      "/api/v1/jobs/", [jobs, dir = options_.jobs_dir](const HttpRequest& request) {
        return JobLogPage(jobs, dir, request);
      }));
  // Any other API path: 404, but only to who may ask (the pages' prefix below is public).
  TESSERA_RETURN_IF_ERROR(server.HandlePrefix("/api/", [](const HttpRequest& request) {
    return TextResponse(404, absl::StrCat("no such page: ", request.path));
  }));
  if (!options_.dashboard_dir.empty()) {
    TESSERA_ASSIGN_OR_RETURN(metrics::HttpHandler files,
                             metrics::StaticFileHandler({.root = options_.dashboard_dir}));
    // The pages hold no secret, and must load to ask for the token.
    TESSERA_RETURN_IF_ERROR(
        server.HandlePrefix("/", std::move(files), {.access = metrics::HttpAccess::kPublic}));
  }
  return absl::OkStatus();
}

absl::Status HeadHttp::AddListRoutes() {
  HeadService* head = options_.service;
  train::JobManager* jobs = options_.jobs;
  metrics::HttpServer& server = *server_;
  TESSERA_RETURN_IF_ERROR(server.Handle("/api/v1/cluster", [head](const HttpRequest&) {
    v1::ListRequest request;
    v1::ClusterStatus status;
    grpc::Status got = head->admin().GetClusterStatus(nullptr, &request, &status);
    return got.ok() ? JsonResponse(rpc::MessageJson(status)) : FromGrpc(got);
  }));
  TESSERA_RETURN_IF_ERROR(server.Handle("/api/v1/nodes", [head](const HttpRequest&) {
    v1::ListNodesResponse all;
    grpc::Status got = AllPages(
        [head](v1::ListRequest* r, v1::ListNodesResponse* p) {
          return head->nodes().ListNodes(nullptr, r, p);
        },
        &all);
    return got.ok() ? JsonResponse(rpc::MessageJson(all)) : FromGrpc(got);
  }));
  TESSERA_RETURN_IF_ERROR(server.Handle("/api/v1/placement_groups", [head](const HttpRequest&) {
    v1::ListPlacementGroupsResponse all;
    grpc::Status got = AllPages(
        [head](v1::ListRequest* r, v1::ListPlacementGroupsResponse* p) {
          return head->reservations().ListPlacementGroups(nullptr, r, p);
        },
        &all);
    return got.ok() ? JsonResponse(rpc::MessageJson(all)) : FromGrpc(got);
  }));
  TESSERA_RETURN_IF_ERROR(server.Handle("/api/v1/slices", [head](const HttpRequest&) {
    v1::ListSlicesResponse all;
    grpc::Status got = AllPages(
        [head](v1::ListRequest* r, v1::ListSlicesResponse* p) {
          return head->reservations().ListSlices(nullptr, r, p);
        },
        &all);
    return got.ok() ? JsonResponse(rpc::MessageJson(all)) : FromGrpc(got);
  }));
  TESSERA_RETURN_IF_ERROR(server.Handle("/api/v1/actors", [head](const HttpRequest&) {
    v1::ListActorsResponse all;
    grpc::Status got = AllPages(
        [head](v1::ListRequest* r, v1::ListActorsResponse* p) {
          return head->actors().ListActors(nullptr, r, p);
        },
        &all);
    return got.ok() ? JsonResponse(rpc::MessageJson(all)) : FromGrpc(got);
  }));
  TESSERA_RETURN_IF_ERROR(server.Handle("/api/v1/jobs", [head, jobs](const HttpRequest&) {
    v1::ListRequest request;
    v1::JobList gangs;
    grpc::Status got = jobs->ListGangJobs(nullptr, &request, &gangs);
    if (!got.ok()) return FromGrpc(got);
    v1::ListJobsResponse drivers;
    got = AllPages([head](v1::ListRequest* r,
                          v1::ListJobsResponse* p) { return head->jobs().ListJobs(nullptr, r, p); },
                   &drivers);
    if (!got.ok()) return FromGrpc(got);
    Json out = rpc::MessageJson(gangs);
    out["drivers"] = rpc::MessageJson(drivers)["jobs"];
    return JsonResponse(out);
  }));
  TESSERA_RETURN_IF_ERROR(server.Handle("/api/v1/events", [head](const HttpRequest& request) {
    v1::ListEventsRequest list;
    int64_t after = 0;
    if (auto text = request.QueryValue("after");
        text.has_value() && !text->empty() &&
        !absl::SimpleAtoi(absl::string_view(text->data(), text->size()), &after)) {
      return TextResponse(400, "after: not a number");
    }
    list.set_after(after);
    v1::ListEventsResponse events;
    grpc::Status got = head->jobs().ListEvents(nullptr, &list, &events);
    return got.ok() ? JsonResponse(rpc::MessageJson(events)) : FromGrpc(got);
  }));
  return absl::OkStatus();
}

absl::Status HeadHttp::RegisterMetrics() {
  const std::function<v1::ClusterStatus()> status_of = CachedClusterStatus(options_.service);
  TESSERA_RETURN_IF_ERROR(RegisterNodeGauges(status_of));
  TESSERA_RETURN_IF_ERROR(RegisterReservationGauges(status_of));
  TESSERA_RETURN_IF_ERROR(RegisterGangGauges());
  TESSERA_RETURN_IF_ERROR(RegisterCounters());
  return absl::OkStatus();
}

absl::Status HeadHttp::AddGauge(metrics::MetricDefinition definition,
                                metrics::CollectCallback callback) {
  TESSERA_ASSIGN_OR_RETURN(metrics::CallbackRegistration registration,
                           registry_->AddCallbackGauge(std::move(definition), std::move(callback)));
  callbacks_.push_back(std::move(registration));
  return absl::OkStatus();
}

absl::Status HeadHttp::RegisterNodeGauges(const std::function<v1::ClusterStatus()>& status_of) {
  TESSERA_RETURN_IF_ERROR(
      AddGauge({"tessera_nodes", "Nodes the head knows, by state.", {"state"}},
               [status_of](metrics::SampleSink& sink) {
                 const v1::ClusterStatus status = status_of();
                 std::map<std::string, int> by_state;
                 for (const std::string_view state : {"ALIVE", "DRAINING", "DEAD"})
                   by_state[std::string(state)] = 0;
                 for (const v1::NodeInfo& node : status.nodes()) {
                   ++by_state[std::string(rpc::NodeStateName(node.state()))];
                 }
                 for (const auto& [state, count] : by_state) {
                   IgnoreStatus(sink.Emit({state}, count),
                                "a sample with unusable labels is left out; the scrape goes on");
                 }
               }));
  TESSERA_RETURN_IF_ERROR(
      AddGauge({"tessera_head_node_resource_capacity",
                "What a node has of a resource (its unit: cores, bytes, "
                "devices).",
                {"node", "resource"}},
               [status_of](metrics::SampleSink& sink) {
                 const v1::ClusterStatus status = status_of();
                 for (const v1::NodeInfo& node : status.nodes()) {
                   for (const auto& [resource, raw] : node.node().resources().raw()) {
                     IgnoreStatus(sink.Emit({node.node().node_id(), resource},
                                            static_cast<double>(raw) / Quantity::kScale),
                                  "a sample with unusable labels is left out; the scrape goes on");
                   }
                 }
               }));
  TESSERA_RETURN_IF_ERROR(AddGauge(
      {"tessera_head_node_resource_reserved",
       "What leases and bundles hold of a node's resource (its "
       "unit), as the head accounts for it.",
       {"node", "resource"}},
      [status_of](metrics::SampleSink& sink) {
        const v1::ClusterStatus status = status_of();
        for (const v1::NodeInfo& node : status.nodes()) {
          for (const auto& [resource, raw] : node.node().resources().raw()) {
            auto free = node.available().raw().find(resource);
            const int64_t available = free == node.available().raw().end() ? 0 : free->second;
            IgnoreStatus(sink.Emit({node.node().node_id(), resource},
                                   static_cast<double>(raw - available) / Quantity::kScale),
                         "a sample with unusable labels is left out; the scrape goes on");
          }
        }
      }));
  return absl::OkStatus();
}

absl::Status HeadHttp::RegisterReservationGauges(
    const std::function<v1::ClusterStatus()>& status_of) {
  TESSERA_RETURN_IF_ERROR(AddGauge(
      {"tessera_placement_groups", "Placement groups, by state.", {"state"}},
      [status_of](metrics::SampleSink& sink) {
        const v1::ClusterStatus status = status_of();
        std::map<std::string, int> by_state;
        for (const std::string_view s : {"PENDING", "CREATED", "RESCHEDULING", "INFEASIBLE"}) {
          by_state[std::string(s)] = 0;
        }
        for (const v1::PlacementGroupInfo& group : status.placement_groups()) {
          ++by_state[std::string(rpc::PlacementGroupStateName(group.state()))];
        }
        for (const auto& [state, count] : by_state) {
          IgnoreStatus(sink.Emit({state}, count),
                       "a sample with unusable labels is left out; the scrape goes on");
        }
      }));
  TESSERA_RETURN_IF_ERROR(AddGauge(
      {"tessera_slice_groups", "Slice reservations (whole TPU slices), by state.", {"state"}},
      [status_of](metrics::SampleSink& sink) {
        const v1::ClusterStatus status = status_of();
        std::map<std::string, int> by_state;
        for (const std::string_view s : {"PENDING", "RESERVED", "INFEASIBLE", "BROKEN"}) {
          by_state[std::string(s)] = 0;
        }
        for (const v1::SliceGroupInfo& group : status.slices().groups()) {
          ++by_state[std::string(rpc::SliceGroupStateName(group.state()))];
        }
        for (const auto& [state, count] : by_state) {
          IgnoreStatus(sink.Emit({state}, count),
                       "a sample with unusable labels is left out; the scrape goes on");
        }
      }));
  TESSERA_RETURN_IF_ERROR(
      AddGauge({"tessera_demand",
                "Requests the cluster cannot place now, by status (pending: not now; "
                "infeasible: never as the cluster is).",
                {"status"}},
               [status_of](metrics::SampleSink& sink) {
                 const v1::ClusterStatus status = status_of();
                 std::map<std::string, int> by_status{{"pending", 0}, {"infeasible", 0}};
                 for (const v1::Demand& demand : status.demand()) {
                   ++by_status[std::string(rpc::DemandStatusName(demand.status()))];
                 }
                 for (const auto& [word, count] : by_status) {
                   IgnoreStatus(sink.Emit({word}, count),
                                "a sample with unusable labels is left out; the scrape goes on");
                 }
               }));
  return absl::OkStatus();
}

absl::Status HeadHttp::RegisterGangGauges() {
  train::JobManager* jobs = options_.jobs;
  TESSERA_RETURN_IF_ERROR(AddGauge(
      {"tessera_gangs", "Training gangs (jobs of `tessera job`), by state.", {"state"}},
      [jobs](metrics::SampleSink& sink) {
        v1::ListRequest request;
        v1::JobList list;
        IgnoreStatus(rpc::FromGrpcStatus(jobs->ListGangJobs(nullptr, &request, &list)),
                     "Unavailable only before the jobs are adopted: the list is empty then");
        std::map<std::string, int> by_state;
        for (const v1::GangJobState s :
             {v1::GANG_JOB_STATE_PENDING, v1::GANG_JOB_STATE_STARTING, v1::GANG_JOB_STATE_RUNNING,
              v1::GANG_JOB_STATE_RESTARTING, v1::GANG_JOB_STATE_SUCCEEDED,
              v1::GANG_JOB_STATE_FAILED, v1::GANG_JOB_STATE_STOPPED}) {
          by_state[std::string(rpc::GangJobStateName(s))] = 0;
        }
        for (const v1::JobStatus& job : list.jobs()) {
          ++by_state[std::string(rpc::GangJobStateName(job.state()))];
        }
        for (const auto& [state, count] : by_state) {
          IgnoreStatus(sink.Emit({state}, count),
                       "a sample with unusable labels is left out; the scrape goes on");
        }
      }));
  TESSERA_RETURN_IF_ERROR(AddGauge(
      {"tessera_gang_restarts",
       "Group restarts after failures of each training gang so far.",
       {"job"}},
      [jobs](metrics::SampleSink& sink) {
        v1::ListRequest request;
        v1::JobList list;
        IgnoreStatus(rpc::FromGrpcStatus(jobs->ListGangJobs(nullptr, &request, &list)),
                     "Unavailable only before the jobs are adopted: the list is empty then");
        for (const v1::JobStatus& job : list.jobs()) {
          IgnoreStatus(sink.Emit({job.job_id()}, job.restart_count()),
                       "a sample with unusable labels is left out; the scrape goes on");
        }
      }));
  return absl::OkStatus();
}

absl::Status HeadHttp::RegisterCounters() {
  HeadService* head = options_.service;
  TESSERA_ASSIGN_OR_RETURN(
      metrics::CallbackRegistration events,
      registry_->AddCallbackCounter(
          {"tessera_head_events_total",
           "Events the head has recorded since it started (the newest are kept for `tessera "
           "events`).",
           {}},
          [head](metrics::SampleSink& sink) {
            IgnoreStatus(sink.Emit({}, static_cast<double>(head->event_log().last_seq())),
                         "a sample with unusable labels is left out; the scrape goes on");
          }));
  callbacks_.push_back(std::move(events));
  TESSERA_ASSIGN_OR_RETURN(
      metrics::CallbackRegistration tasks,
      registry_->AddCallbackCounter(
          {"tessera_tasks_total",
           "Task runs, actor constructors and actor calls that ended, as their drivers reported "
           "them, by kind (task, actor_create, actor_call) and outcome (ok, error, retried, "
           "worker_died, cancelled).",
           {"kind", "outcome"}},
          [head](metrics::SampleSink& sink) {
            for (const auto& [key, count] : head->task_events().Counts()) {
              IgnoreStatus(sink.Emit({key.first, key.second}, static_cast<double>(count)),
                           "a sample with unusable labels is left out; the scrape goes on");
            }
          }));
  callbacks_.push_back(std::move(tasks));
  return absl::OkStatus();
}

}  // namespace tessera
