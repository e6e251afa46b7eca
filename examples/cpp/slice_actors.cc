// One actor per host of a TPU v6e 4x4 slice: reserves the slice whole (tessera::ReserveSlices in
// include/tessera/placement_group.h), starts one actor in each host's bundle (placement group =
// the reservation's name, bundle = the host), and prints what each actor sees: its TPU chips, its
// TPU worker id and its Tessera worker id. Then kills the actors and releases the slice.
//
//   tessera up examples/clusters/demo.yaml
//   build/examples/cpp/slice_actors
//   tessera down
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_join.h"
#include "tessera/placement_group.h"
#include "tessera/tessera.h"

class HostAgent {
 public:
  std::string Describe() const {
    const tessera::RuntimeContext& context = tessera::GetRuntimeContext();
    auto chips = context.accelerator_ids.find("TPU");
    const char* tpu_worker = std::getenv("TPU_WORKER_ID");
    return "node " + context.node_id + ", TPU chips [" +
           (chips == context.accelerator_ids.end() ? "" : absl::StrJoin(chips->second, ",")) +
           "], TPU_WORKER_ID=" + (tpu_worker == nullptr ? "<unset>" : tpu_worker) + ", worker " +
           context.worker_id;
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
  // The shape is a type, checked when it is made: a v6e 4x4 (4 hosts of 4 chips).
  auto shape = tessera::MakeSliceShape(tessera::TpuGeneration::kV6e, {{4, 4}});
  if (!shape.ok()) return Fail("shape", shape.status());
  auto slice =
      tessera::ReserveSlices({.name = tessera::SliceGroupName("slice-actors"), .shape = *shape});
  if (!slice.ok()) return Fail("reserve", slice.status());
  std::printf("reserved %s: %zu hosts\n", slice->name.value().c_str(), slice->hosts.size());

  std::vector<tessera::ActorHandle<HostAgent>> actors;
  for (size_t i = 0; i < slice->hosts.size(); ++i) {
    actors.push_back(tessera::Actor(MakeHostAgent)
                         .Resources({{"TPU", 4}})
                         .PlacementGroup(slice->name, static_cast<int>(i))
                         .Remote());
  }
  int code = 0;
  for (size_t i = 0; i < actors.size(); ++i) {
    auto text = tessera::Get(actors[i].Task(&HostAgent::Describe).Remote(), absl::Seconds(60));
    if (!text.ok()) {
      code = Fail("actor " + std::to_string(i), text.status());
      continue;
    }
    std::printf("bundle %zu: %s\n", i, text->c_str());
    // Host i of the slice is TPU worker i and sees its chips: anything else is a bug.
    if (text->find("TPU_WORKER_ID=" + std::to_string(i) + ",") == std::string::npos ||
        text->find("TPU chips []") != std::string::npos) {
      code = Fail("actor " + std::to_string(i),
                  absl::InternalError("it does not see host " + std::to_string(i) +
                                      "'s chips and TPU worker id"));
    }
  }
  for (auto& actor : actors) (void)tessera::Kill(actor);
  if (absl::Status s = tessera::ReleaseSlices(slice->name); !s.ok()) code = Fail("release", s);
  tessera::Shutdown();
  return code;
}
