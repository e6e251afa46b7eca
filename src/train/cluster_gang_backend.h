// ClusterGangBackend: the GangBackend of a running cluster. Reservations are the head's slice
// groups (whole TPU slices, NVLink hosts) and placement groups (workers, nnodes), asked of the
// head through a ClusterHead (cluster_head.h: in process inside the head, over gRPC from a
// program); ranks are command workers leased inside their bundles from the agent holding them
// (over gRPC), owned by the controller (WorkerSpec.stop_when_unwatched: a rank whose controller
// died never lingers), and watched over NodeAgent.WatchWorker. A head whose jobs outlive it (a
// durable state store) leases them without stop_when_unwatched instead: the job's record owns
// them, and the restarted head watches them again (or releases their reservation, which ends
// them).
//
// Thread-safe: one mutex guards the agents' stub cache and the node table; calls run outside it.
#pragma once

#include <map>
#include <memory>
#include <set>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "client/cluster_client.h"
#include "train/cluster_head.h"
#include "train/gang_backend.h"

namespace tessera::train {

class ClusterGangBackend final : public GangBackend {
 public:
  // The head through `head`, the node agents through `agents` (its head is not called here).
  // `ranks_outlive_the_head`: ranks are not stopped when their watch goes away (the job's record
  // in a durable store owns them; see above).
  ClusterGangBackend(std::unique_ptr<ClusterHead> head,
                     std::shared_ptr<client::ClusterClient> agents,
                     bool ranks_outlive_the_head = false);

  absl::StatusOr<GangReservation> Reserve(const std::string& name,
                                          const v1::GangPlacement& placement, GangSize size,
                                          absl::Duration timeout,
                                          const std::function<bool()>& stopped) override;
  absl::StatusOr<bool> RoomToGrow(const v1::GangPlacement& placement, int extra,
                                  const GangReservation& current) override;
  void Release(const GangReservation& reservation) override;
  absl::StatusOr<NodePort> FreePort(const GangSlot& slot) override;
  absl::Status PrepareWorkingDir(const GangSlot& slot, const JobId& job_id,
                                 const std::string& archive) override;
  absl::StatusOr<StartedRank> StartRank(const RankLaunch& launch) override;
  std::unique_ptr<RankWatch> WatchRank(
      const StartedRank& rank, std::function<void(bool is_stderr, const std::string& data)> output,
      std::function<void(RankEnd end)> ended) override;
  absl::Status SignalRank(const StartedRank& rank, int signal) override;
  absl::StatusOr<std::set<std::string>> DeadNodes(const std::set<std::string>& nodes) override;
  absl::StatusOr<size_t> WriteStdin(const StartedRank& rank, const std::string& data,
                                    bool close) override;

 private:
  struct NodeEntry {
    std::string address;
    std::string host;
    std::string accelerator_type;
  };
  absl::Status RefreshNodes() ABSL_LOCKS_EXCLUDED(mu_);
  absl::StatusOr<NodeEntry> Node(const std::string& node_id) ABSL_LOCKS_EXCLUDED(mu_);
  v1::NodeAgent::Stub* Agent(const std::string& address) ABSL_LOCKS_EXCLUDED(mu_);
  // `slices` whole slices (of the first shape for an elastic range; a fixed gang keeps every
  // fallback), waiting up to `timeout` while pending (zero: not at all).
  absl::StatusOr<GangReservation> ReserveSlices(const std::string& name,
                                                const v1::GangPlacement& placement, int slices,
                                                absl::Duration timeout,
                                                const std::function<bool()>& stopped);
  // `bundles` bundles; `only_on` (may be null) is ANDed into every bundle's selector.
  absl::StatusOr<GangReservation> ReservePlacementGroup(const std::string& name,
                                                        const v1::GangPlacement& placement,
                                                        int bundles, absl::Duration timeout,
                                                        const std::function<bool()>& stopped,
                                                        const v1::LabelSelector* only_on);
  // Slots from bundles: node, host, devices; visible bundles per node.
  absl::Status FillSlot(const std::string& node_id, const v1::Allocation& allocation,
                        GangSlot* slot);

  const std::unique_ptr<ClusterHead> head_;
  const std::shared_ptr<client::ClusterClient> agents_;
  const bool ranks_outlive_the_head_;
  absl::Mutex mu_;
  std::map<std::string, NodeEntry> nodes_ ABSL_GUARDED_BY(mu_);
};

}  // namespace tessera::train
