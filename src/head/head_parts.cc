// HeadParts: the construction of the head's tables, and what crosses them: a node's death, a
// driver's end, the periodic checks, reading the tables back.
#include "head/head_parts.h"

#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/status_macros.h"

namespace tessera {

HeadParts::HeadParts(HeadServiceOptions head_options)
    : options(std::move(head_options)),
      clock(options.clock != nullptr ? options.clock : Clock::Real()),
      events(options.max_events, clock),
      writer(options.store, &events, options.store_metrics),
      actor_store(&writer),
      drivers(options.driver_timeout),
      jobs(JobTableOptions{clock, &writer, &events, options.max_ended_jobs}),
      kv(&writer),
      actors(ActorDirectoryOptions{&actor_store, clock, options.max_dead_actors}),
      controller(ClusterControllerOptions{.clock = clock,
                                          .writer = &writer,
                                          .events = &events,
                                          .drivers = &drivers,
                                          .agent_clients = options.agent_clients,
                                          .heartbeat_interval = options.heartbeat_interval,
                                          .node_timeout = options.node_timeout,
                                          .scheduling = options.scheduling,
                                          .retry_interval = options.retry_interval,
                                          .max_concurrent_syncs = options.max_concurrent_syncs,
                                          .latency = options.latency},
                 this) {}

HeadParts::~HeadParts() = default;

void HeadParts::OnNodeDead(const std::string& node, const std::string& reason,
                           const std::vector<Allocation>& lost, std::string* event) {
  std::vector<std::string> moved;
  std::vector<std::string> broken;
  controller.NodeDead(node, reason, lost, &moved, &broken);
  const int failed_jobs = jobs.FailJobsOn(node, reason);
  const std::vector<std::string> dead_actors =
      actors.NodeDead(node, absl::StrCat("its node ", node, " was declared dead: ", reason));
  ReportActorStoreFailures();
  if (!moved.empty()) {
    absl::StrAppend(event, "; bundles of ", absl::StrJoin(moved, ", "), " are re-placed");
  }
  if (!broken.empty()) {
    absl::StrAppend(event, "; slice groups ", absl::StrJoin(broken, ", "), " are broken");
  }
  if (failed_jobs > 0) {
    absl::StrAppend(event, "; ", failed_jobs,
                    " running jobs are presumed failed (until their real end is recorded)");
  }
  if (!dead_actors.empty()) {
    absl::StrAppend(event, "; actors ", absl::StrJoin(dead_actors, ", "),
                    " are restarting (or died, when detached)");
  }
}

std::vector<size_t> HeadParts::OnBundlesReported(const std::string& node,
                                                 const std::vector<ReportedBundle>& bundles,
                                                 std::optional<int64_t> epoch_seen) {
  return controller.Reconcile(node, bundles, epoch_seen);
}

std::vector<std::string> HeadParts::ReleaseDriver(const std::string& driver,
                                                  const std::string& why) {
  drivers.Forget(driver);
  drivers.NoteGone(driver, clock->Now());  // agents free its objects (heartbeat responses)
  std::vector<std::string> released = controller.ReleaseOwnedBy(driver);
  const std::vector<std::string> owned_actors =
      actors.OwnerGone(driver, absl::StrCat("its owner, driver ", driver, ", ", why));
  ReportActorStoreFailures();
  if (!released.empty() || !owned_actors.empty()) {
    std::string event = absl::StrCat("driver ", driver, " ", why);
    if (!released.empty()) absl::StrAppend(&event, ": released ", absl::StrJoin(released, ", "));
    if (!owned_actors.empty()) {
      absl::StrAppend(&event, released.empty() ? ": " : "; ", "actors ",
                      absl::StrJoin(owned_actors, ", "), " died with it");
    }
    events.Record(std::move(event), "driver");
  }
  return released;
}

void HeadParts::ReportActorStoreFailures() {
  for (std::string& failure : actors.TakeStoreFailures()) events.Record(std::move(failure));
}

void HeadParts::CheckHealth() {
  absl::MutexLock lock(controller.mutex());
  controller.nodes().CheckHealth(clock->Now());
}

void HeadParts::Reconcile(bool wait) {
  // The rounds start first: a release below may wait for a busy reservation and its agents.
  controller.Tick(wait);
  for (const std::string& driver : drivers.TakeExpired(clock->Now())) {
    ReleaseDriver(driver,
                  absl::StrCat("fell silent for ", absl::FormatDuration(drivers.timeout())));
  }
  // Last: a store that does not answer holds this thread up to its retry budget.
  writer.MaybeCheckHealth(clock->Now(), options.store_check_interval);
}

absl::Status HeadParts::RestoreCluster() {
  absl::MutexLock lock(controller.mutex());
  TESSERA_RETURN_IF_ERROR(controller.nodes().Restore());
  return controller.Restore();
}

absl::Status HeadParts::RestoreJobsAndActors() {
  TESSERA_RETURN_IF_ERROR(jobs.Restore());
  TESSERA_RETURN_IF_ERROR(actors.Restore());
  ReportActorStoreFailures();
  // As the owners of reservations: a whole driver timeout to call this head.
  for (const std::string& owner : actors.LiveOwners()) drivers.NoteAlive(owner, clock->Now());
  return absl::OkStatus();
}

}  // namespace tessera
