// One actor per host of a TPU v6e 4x4 slice: reserves the slice whole through the head (as
// `tessera slice reserve` does), starts one actor in each host's bundle (placement group = the
// reservation's name, bundle = the host), and prints what each actor sees: its TPU chips, its
// TPU worker id and its Tessera worker id. Then kills the actors and releases the slice.
//
//   tessera up examples/clusters/demo.yaml
//   build-x/examples/cpp/slice_actors
//   tessera down
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "cli/cluster_client.h"
#include "tessera/tessera.h"

class HostAgent {
 public:
  std::string Describe() const {
    const tessera::RuntimeContext& context = tessera::GetRuntimeContext();
    auto chips = context.accelerator_ids.find("TPU");
    const char* tpu_worker = std::getenv("TPU_WORKER_ID");
    return "node " + context.node_id + ", TPU chips [" +
           (chips == context.accelerator_ids.end() ? "" : absl::StrJoin(chips->second, ",")) +
           "], TPU_WORKER_ID=" + (tpu_worker == nullptr ? "<unset>" : tpu_worker) +
           ", worker " + context.worker_id;
  }
};
std::unique_ptr<HostAgent> MakeHostAgent() { return std::make_unique<HostAgent>(); }
TESSERA_ACTOR(MakeHostAgent);
TESSERA_ACTOR_METHOD(&HostAgent::Describe);

namespace {

int Fail(const std::string& what, const absl::Status& status) {
  std::fprintf(stderr, "slice_actors: %s: %s\n", what.c_str(),
               std::string(status.message()).c_str());
  return 1;
}

}  // namespace

int main() {
  // First thing in main: in a worker process (an actor) this serves calls and never returns.
  if (absl::Status s = tessera::Init(); !s.ok()) return Fail("init", s);
  const std::string name = "slice-actors";
  auto client = tessera::cli::ClusterClient::Connect({});
  if (!client.ok()) return Fail("connect", client.status());
  tessera::cli::ClusterClient& c = **client;

  tessera::v1::ReserveSlicesRequest request;
  request.set_request_id(tessera::cli::NewRequestId("slice"));
  request.set_name(name);
  tessera::v1::SliceAlternative* alt = request.add_alternatives();
  alt->set_accelerator_type("TPU-V6E");
  alt->set_topology("4x4");
  alt->set_num_slices(1);
  tessera::v1::SliceGroupInfo info;
  absl::Status status = c.Call(c.HeadPeer(), tessera::cli::Retry::kSafe,
                               [&](grpc::ClientContext* ctx) {
                                 return c.head().ReserveSlices(ctx, request, &info);
                               });
  if (!status.ok()) return Fail("reserve", status);
  const absl::Time until = absl::Now() + absl::Seconds(30);
  while (info.state() == "PENDING" && absl::Now() < until) {
    absl::SleepFor(absl::Milliseconds(100));  // the head has no wait call for slices
    auto slices = c.ListSlices();
    if (!slices.ok()) return Fail("list slices", slices.status());
    for (const auto& g : slices->groups()) {
      if (g.name() == name) info = g;
    }
  }
  if (info.state() != "RESERVED") {
    return Fail("reserve", absl::UnavailableError("the slice is " + info.state() + ": " +
                                                  info.explanation()));
  }
  std::printf("reserved %s: %d hosts\n", name.c_str(), info.hosts_size());

  std::vector<tessera::ActorHandle<HostAgent>> actors;
  for (int i = 0; i < info.hosts_size(); ++i) {
    actors.push_back(
        tessera::Actor(MakeHostAgent).Resources("TPU=4").PlacementGroup(name, i).Remote());
  }
  int code = 0;
  for (int i = 0; i < info.hosts_size(); ++i) {
    auto text = tessera::Get(actors[i].Task(&HostAgent::Describe).Remote(), absl::Seconds(60));
    if (!text.ok()) {
      code = Fail("actor " + std::to_string(i), text.status());
      continue;
    }
    std::printf("bundle %d: %s\n", i, text->c_str());
    // Host i of the slice is TPU worker i and sees its chips: anything else is a bug.
    if (text->find("TPU_WORKER_ID=" + std::to_string(i) + ",") == std::string::npos ||
        text->find("TPU chips []") != std::string::npos) {
      code = Fail("actor " + std::to_string(i),
                  absl::InternalError("it does not see host " + std::to_string(i) +
                                      "'s chips and TPU worker id"));
    }
  }
  for (auto& actor : actors) (void)tessera::Kill(actor);
  tessera::Shutdown();

  tessera::v1::ReleaseSlicesRequest release;
  release.set_request_id(tessera::cli::NewRequestId("slice-release"));
  release.set_name(name);
  tessera::v1::ReleaseSlicesResponse released;
  status = c.Call(c.HeadPeer(), tessera::cli::Retry::kSafe, [&](grpc::ClientContext* ctx) {
    return c.head().ReleaseSlices(ctx, release, &released);
  });
  if (!status.ok()) return Fail("release", status);
  return code;
}
