// The head's HTTP endpoint on a real socket: head.http, the dashboard's files, the JSON API
// (amounts in units, states as words, device readings from heartbeats, events by sequence), job
// log reads that never leave the jobs folder, valid /metrics, the Prometheus targets file, the
// bearer token on loopback and beyond, the dashboard's one-time login tickets, and the Host
// header (DNS rebinding).
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "head/head_server.h"
#include "metrics/exposition_parser.h"
#include "metrics/http_test_client.h"
#include "rpc/token.h"
#include "scheduling/scheduling_test_util.h"
#include "wire/proto_convert.h"

namespace tessera {
namespace {

using ::testing::HasSubstr;
using testing_util::Res;
using Json = nlohmann::json;

struct Reply {
  int status = 0;
  std::string headers;  // "name: value" lines, names in lower case
  std::string body;
};

// One request to host:port (the server closes after each answer), with `token` as the bearer
// credential when not empty and `headers` (whole lines) besides.
Reply Send(const std::string& host_port, const std::string& method, const std::string& target,
           const std::string& token, const std::string& headers = "") {
  const size_t colon = host_port.rfind(':');
  auto reply = metrics_testing::HttpExchange(
      host_port.substr(0, colon), std::stoi(host_port.substr(colon + 1)), method, target,
      absl::StrCat(token.empty() ? "" : absl::StrCat("Authorization: Bearer ", token, "\r\n"),
                   headers));
  if (!reply.ok()) return {};
  Reply out{reply->status, "", reply->body};
  for (const auto& [name, value] : reply->headers)
    absl::StrAppend(&out.headers, name, ": ", value, "\n");
  return out;
}

std::string FirstLine(const std::string& path) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  return line;
}

class HeadHttpTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char pattern[] = "/tmp/tessera-head-http-XXXXXX";
    ASSERT_NE(::mkdtemp(pattern), nullptr);
    dir_ = pattern;
  }
  void TearDown() override {
    head_.reset();
    std::filesystem::remove_all(dir_);
  }
  void Start(const std::string& bind = "127.0.0.1") {
    HeadOptions options;
    options.state_dir = dir_ + "/state";
    options.bind = bind;
    auto head = HeadServer::Create(options);
    ASSERT_TRUE(head.ok()) << head.status();
    head_ = *std::move(head);
    http_ = FirstLine(dir_ + "/state/head.http");
    ASSERT_FALSE(http_.empty());
  }
  // Registers a node with two GPUs the way an agent does, then one heartbeat with readings.
  void AddNode(const std::string& id, const std::string& http_address) {
    v1::RegisterNodeRequest request;
    v1::NodeDescription* node = request.mutable_node();
    node->set_node_id(id);
    node->set_address("127.0.0.1:1");
    node->set_incarnation("i1");
    node->set_http_address(http_address);
    wire::ResourcesToProto(Res("CPU=8,GPU=2,memory=16GiB"), node->mutable_resources());
    v1::RegisterNodeResponse registered;
    ASSERT_TRUE(head_->service()->nodes().RegisterNode(nullptr, &request, &registered).ok());
    v1::HeartbeatRequest beat;
    beat.set_node_id(id);
    beat.set_incarnation("i1");
    v1::DeviceSample* sample = beat.add_device_samples();
    sample->set_resource("GPU");
    sample->set_index(1);
    sample->set_time_ms(1764638400000);
    sample->set_utilization(0.75);
    sample->set_memory_used_bytes(1024);
    v1::HeartbeatResponse answer;
    ASSERT_TRUE(head_->service()->nodes().Heartbeat(nullptr, &beat, &answer).ok());
  }

  // A GET with the cluster token, or with `token` ("" for none).
  Reply Get(const std::string& host_port, const std::string& target) {
    return Send(host_port, "GET", target, head_->token());
  }
  Reply Get(const std::string& host_port, const std::string& target, const std::string& token) {
    return Send(host_port, "GET", target, token);
  }

  std::string dir_;
  std::unique_ptr<HeadServer> head_;
  std::string http_;
};

TEST_F(HeadHttpTest, ServesTheDashboardAndItsJsonInUnitsAndWords) {
  Start();
  AddNode("n1", "127.0.0.1:9");
  const Reply index = Get(http_, "/");
  EXPECT_EQ(index.status, 200);
  EXPECT_THAT(index.body, HasSubstr("<html"));
  EXPECT_THAT(Get(http_, "/js/app.js").headers, HasSubstr("content-type: text/javascript"));

  const Reply cluster = Get(http_, "/api/v1/cluster");
  ASSERT_EQ(cluster.status, 200) << cluster.body;
  const Json status = Json::parse(cluster.body);
  EXPECT_EQ(status["http_address"], http_);
  EXPECT_EQ(status["nodes"][0]["state"], "ALIVE");
  EXPECT_EQ(status["nodes"][0]["node"]["resources"]["CPU"], 8);
  EXPECT_EQ(status["nodes"][0]["node"]["resources"]["memory"], 17179869184);

  const Json telemetry = Json::parse(Get(http_, "/api/v1/nodes/n1/telemetry").body);
  ASSERT_EQ(telemetry["devices"].size(), 1u);
  EXPECT_EQ(telemetry["devices"][0]["index"], 1);
  const Json& sample = telemetry["devices"][0]["samples"][0];
  EXPECT_DOUBLE_EQ(sample["utilization"].get<double>(), 0.75);
  EXPECT_EQ(sample["memory_used_bytes"], 1024);
  EXPECT_FALSE(sample.contains("power_watts"));  // not measured: absent, never 0
  EXPECT_EQ(Get(http_, "/api/v1/nodes/nobody/telemetry").status, 404);
  EXPECT_EQ(Get(http_, "/api/v1/nodes/n1/other").status, 404);
  // One node, as the list shows it; an unknown one is null (the page says so, nothing failed).
  const Reply one = Get(http_, "/api/v1/nodes/n1");
  ASSERT_EQ(one.status, 200) << one.body;
  const Json node = Json::parse(one.body)["node"];
  EXPECT_EQ(node["node"]["node_id"], "n1");
  EXPECT_EQ(node["state"], "ALIVE");
  EXPECT_EQ(node["node"]["resources"]["CPU"], 8);
  const Reply nobody = Get(http_, "/api/v1/nodes/nobody");
  ASSERT_EQ(nobody.status, 200);
  EXPECT_TRUE(Json::parse(nobody.body)["node"].is_null());
  EXPECT_EQ(Get(http_, "/api/v1/nodes/").status, 404);

  for (const char* listing : {"/api/v1/nodes", "/api/v1/placement_groups", "/api/v1/slices",
                              "/api/v1/actors", "/api/v1/jobs"}) {
    const Reply reply = Get(http_, listing);
    EXPECT_EQ(reply.status, 200) << listing << ": " << reply.body;
    EXPECT_TRUE(Json::parse(reply.body, nullptr, false).is_object()) << listing;
  }
}

TEST_F(HeadHttpTest, JobLogsAreReadOnlyInsideTheJobsFolder) {
  Start();
  EXPECT_EQ(Get(http_, "/api/v1/jobs/no-such-job/logs").status, 404);
  EXPECT_EQ(Get(http_, "/api/v1/jobs/..%2F..%2Ftoken/logs").status, 404);
  EXPECT_EQ(Get(http_, "/api/v1/jobs/x/logs?offset=-1").status, 400);
  EXPECT_EQ(Get(http_, "/api/v1/events?after=abc").status, 400);
  const Json events = Json::parse(Get(http_, "/api/v1/events?after=0").body);
  EXPECT_TRUE(events["events"].is_array());
  EXPECT_EQ(events["next"], 0);
}

TEST_F(HeadHttpTest, MetricsAreValidExpositionAndTheTargetsFileNamesEveryEndpoint) {
  Start();
  AddNode("n1", "127.0.0.1:9");
  const Reply scrape = Get(http_, "/metrics");
  ASSERT_EQ(scrape.status, 200);
  EXPECT_THAT(scrape.headers, HasSubstr("content-type: text/plain; version=0.0.4"));
  auto parsed = metrics::ParsePrometheusText(scrape.body);
  ASSERT_TRUE(parsed.ok()) << parsed.status() << "\n" << scrape.body;
  EXPECT_EQ(parsed->Value("tessera_nodes", {{"state", "ALIVE"}}), 1);
  EXPECT_EQ(
      parsed->Value("tessera_head_node_resource_capacity", {{"node", "n1"}, {"resource", "GPU"}}),
      2);
  EXPECT_EQ(
      parsed->Value("tessera_head_node_resource_reserved", {{"node", "n1"}, {"resource", "CPU"}}),
      0);

  const std::string targets = dir_ + "/state/prometheus/targets.json";
  Json groups;
  const absl::Time deadline = absl::Now() + absl::Seconds(30);
  while (absl::Now() < deadline) {
    groups = Json::parse(FirstLine(targets).empty() ? "[]" : [&] {
      std::ifstream in(targets);
      return std::string(std::istreambuf_iterator<char>(in), {});
    }(), nullptr, false);
    if (groups.is_array() && groups.size() == 2) break;
    absl::SleepFor(absl::Milliseconds(100));
  }
  ASSERT_TRUE(groups.is_array() && groups.size() == 2) << groups.dump();
  EXPECT_EQ(groups[0]["targets"][0], http_);
  EXPECT_EQ(groups[0]["labels"]["job"], "tessera-head");
  EXPECT_EQ(groups[1]["targets"][0], "127.0.0.1:9");
  EXPECT_EQ(groups[1]["labels"]["node"], "n1");

  head_->Shutdown();
  EXPECT_FALSE(std::filesystem::exists(dir_ + "/state/head.http"));
}

TEST_F(HeadHttpTest, BeyondLoopbackTheClusterTokenIsAskedFor) {
  Start("0.0.0.0");
  const Reply refused = Get(http_, "/api/v1/cluster", "");
  EXPECT_EQ(refused.status, 401);
  EXPECT_THAT(refused.headers, HasSubstr("www-authenticate: Bearer"));
  EXPECT_EQ(Get(http_, "/metrics", "wrong-token").status, 401);
  EXPECT_EQ(Get(http_, "/metrics", head_->token()).status, 200);
}

// Issue 29: on loopback every local user reaches the port, so the token is asked for there too;
// job logs (0600 files) and the agents' addresses go only to who can read the token file.
TEST_F(HeadHttpTest, OnLoopbackTheTokenIsAskedForTooAndJobLogsAndAgentsStayPrivate) {
  Start();
  AddNode("n1", "127.0.0.1:9");
  for (const char* target : {"/api/v1/jobs/some-job/logs", "/api/v1/jobs/some-job/logs?rank=0",
                             "/api/v1/nodes", "/api/v1/nodes/n1", "/api/v1/cluster",
                             "/api/v1/events", "/metrics", "/api/v1/no-such-page"}) {
    const Reply refused = Get(http_, target, "");
    EXPECT_EQ(refused.status, 401) << target;
    EXPECT_THAT(refused.body, ::testing::Not(HasSubstr("127.0.0.1:9"))) << target;
  }
  EXPECT_EQ(Get(http_, "/api/v1/nodes", "not-the-token").status, 401);
  EXPECT_EQ(Get(http_, "/api/v1/nodes").status, 200);
  // The pages hold no secret: they load, and then ask.
  EXPECT_EQ(Get(http_, "/", "").status, 200);
}

// What Prometheus is given opens /metrics and nothing else: a scraper that sends it to a
// process squatting a dead target's port gives away no job log and no address.
TEST_F(HeadHttpTest, TheScrapeTokenOpensMetricsAloneAndIsKeptPrivate) {
  Start();
  const std::string path = dir_ + "/state/scrape-token";
  struct stat st {};
  ASSERT_EQ(::stat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  const std::string scrape = FirstLine(path);
  ASSERT_EQ(scrape, *rpc::DeriveScrapeToken(head_->token()));
  EXPECT_NE(scrape, head_->token());
  EXPECT_EQ(Get(http_, "/metrics", scrape).status, 200);
  for (const std::string target :
       {"/api/v1/nodes", "/api/v1/cluster", "/api/v1/jobs", "/api/v1/jobs/x/logs"}) {
    EXPECT_EQ(Get(http_, target, scrape).status, 401) << target;
  }
  EXPECT_EQ(Get(http_, "/metrics", "not-the-scrape-token").status, 401);
}

TEST_F(HeadHttpTest, ALoginTicketFromTheHeadsRpcOpensOneSessionForTheDashboard) {
  Start();
  // Tickets come only from the gRPC method (a caller that proved the token); no HTTP route
  // mints them, so the token is never sent to an HTTP port.
  EXPECT_EQ(Send(http_, "POST", "/api/v1/login-tickets", head_->token()).status, 405);
  v1::CreateDashboardLoginResponse login;
  ASSERT_TRUE(head_->service()->admin().CreateDashboardLogin(nullptr, nullptr, &login).ok());
  EXPECT_EQ(login.expires_in_s(), 60);
  EXPECT_EQ(login.http_address(), http_);
  const std::string header = absl::StrCat("X-Tessera-Login-Ticket: ", login.ticket(), "\r\n");
  const Reply opened = Send(http_, "POST", "/api/v1/sessions", "", header);
  ASSERT_EQ(opened.status, 200) << opened.body;
  const std::string session = Json::parse(opened.body)["session"];
  EXPECT_NE(session, head_->token());
  const Reply again = Send(http_, "POST", "/api/v1/sessions", "", header);
  EXPECT_EQ(again.status, 403);
  EXPECT_THAT(again.body, HasSubstr("the login ticket is unknown, used or expired"));
  EXPECT_EQ(Send(http_, "POST", "/api/v1/sessions", "").status, 400);
  // The session reads what the page reads, and mints nothing.
  EXPECT_EQ(Get(http_, "/api/v1/cluster", session).status, 200);
  EXPECT_EQ(Get(http_, "/api/v1/jobs/x/logs", session).status, 404);
  EXPECT_EQ(Send(http_, "POST", "/api/v1/login-tickets", session).status, 405);
  EXPECT_EQ(Send(http_, "PUT", "/api/v1/cluster", session).status, 405);
}

// A web page of another origin, whose host name a rebinding DNS server points at 127.0.0.1,
// sends its own name as Host: refused, even with a credential it could not have anyway.
TEST_F(HeadHttpTest, AHostHeaderNamingAnotherServerIsRefused) {
  Start();
  const size_t colon = http_.rfind(':');
  const int port = std::stoi(http_.substr(colon + 1));
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(static_cast<uint16_t>(port));
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)), 0);
  const std::string request =
      absl::StrCat("GET /api/v1/nodes HTTP/1.1\r\nHost: attacker.example:", port,
                   "\r\nAuthorization: Bearer ", head_->token(), "\r\n\r\n");
  ASSERT_EQ(::send(fd, request.data(), request.size(), MSG_NOSIGNAL),
            static_cast<ssize_t>(request.size()));
  std::string raw;
  char buffer[4096];
  for (ssize_t n; (n = ::recv(fd, buffer, sizeof(buffer), 0)) > 0;) raw.append(buffer, n);
  ::close(fd);
  EXPECT_THAT(raw, HasSubstr("HTTP/1.1 421 Misdirected Request"));
  EXPECT_THAT(raw, HasSubstr("misdirected request"));
}

}  // namespace
}  // namespace tessera
