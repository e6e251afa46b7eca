// GangBackend: what a gang controller needs from a cluster — reserve a gang's placement whole,
// start one rank in one slot of it, watch and signal that rank, and release the reservation. The
// controller (gang_controller.h) holds the policy; a backend only makes calls. The cluster's
// backend (cluster_gang_backend.h) reaches the head through a ClusterHead (in process inside the
// head, gRPC from a program) and speaks gRPC to the node agents; tests use fakes.
//
// Thread-safety: implementations are thread-safe (ranks are started and watched in parallel).
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "tessera/v1/jobs.pb.h"
#include "tessera/v1/node_agent.pb.h"
#include "train/gang_layout.h"
#include "vocabulary/ids.h"

namespace tessera::train {

// The reservation of a job's attempt ("<job>-<attempt>"), and the probe that looks for room to
// grow beside reservation `reservation` ("<reservation>-probe"). The backend makes it a
// placement group or a slice group of that name (GangReservation::slice_group).
inline std::string AttemptReservationName(const JobId& job_id, int attempt) {
  return job_id.value() + "-" + std::to_string(attempt);
}
inline std::string ProbeReservationName(const std::string& reservation) {
  return reservation + "-probe";
}

// How many members (workers, nodes or whole slices) a gang may have: min == max unless elastic.
struct GangSize {
  int min = 1;
  int max = 1;
};

struct NodePort {
  int port = 0;
  std::string network_interface;
};

// A reservation held for one attempt of a gang: one slot per rank.
struct GangReservation {
  int members = 0;  // workers, nodes or slices reserved (within the GangSize)
  // The placement group's name, or the slice group's when slice_group (the head knows it as a
  // PlacementGroupName or a SliceGroupName: the backend, which reserved it, makes it one).
  std::string name;
  bool slice_group = false;
  std::vector<GangSlot> slots;
  // Per slot: what its rank's lease asks for inside the bundle.
  std::vector<v1::Resources> slot_resources;
  // Per slot: the bundles whose devices its rank sees (the node-union mask); empty: its own.
  std::vector<std::vector<int>> visible_bundles;
  std::string explanation;  // how it was placed (which alternative), for the job's log
};

// Everything one rank needs to start.
struct RankLaunch {
  int rank = 0;
  GangSlot slot;
  std::string reservation;
  v1::Resources resources;
  std::vector<int> visible_bundles;
  std::vector<std::string> argv;
  std::map<std::string, std::string> env;
  std::string cwd;
  std::optional<JobId> working_dir_job;  // the job whose working directory it runs in; none
  bool stdin_pipe = false;  // its stdin is fed by WriteStdin (rank 0 of a forward_stdin job)
  absl::Duration hang_timeout = absl::ZeroDuration();
  JobId job_id;
};

struct StartedRank {
  int rank = 0;
  std::string node_id;
  std::string agent_address;
  std::string worker_id;
  int pid = 0;
  std::map<std::string, std::string> isolation_env;
};

// How a watched rank ended: its exit, or why contact with it was lost (an error status).
using RankEnd = absl::StatusOr<v1::WorkerExit>;

class RankWatch {
 public:
  virtual ~RankWatch() = default;  // cancels and waits for the watch thread
  // Ends the watch early (its `ended` callback then gets Cancelled).
  virtual void Cancel() = 0;
};

class GangBackend {
 public:
  virtual ~GangBackend() = default;

  // Reserves `placement` under `name` with as many members as fit now between `size.min` and
  // `size.max` (members: workers, nodes, or whole slices), largest first; at the minimum it
  // waits while it is pending until `timeout`; `stopped` is asked meanwhile.
  // ResourceExhausted when it can never be placed (the explanation says why), DeadlineExceeded
  // when there was no room in time, Cancelled when stopped. Nothing is held on error.
  virtual absl::StatusOr<GangReservation> Reserve(const std::string& name,
                                                  const v1::GangPlacement& placement, GangSize size,
                                                  absl::Duration timeout,
                                                  const std::function<bool()>& stopped) = 0;
  // Whether `extra` more members would fit now beside `current` (an elastic gang below its
  // maximum asks before it grows). Holds nothing afterwards.
  virtual absl::StatusOr<bool> RoomToGrow(const v1::GangPlacement& placement, int extra,
                                          const GangReservation& current) = 0;
  // Releases the reservation (its remaining workers are killed by their agents).
  virtual void Release(const GangReservation& reservation) = 0;

  // A port free on the node's host (MASTER_PORT, the JAX coordinator), and the network
  // interface the node is reached on ("" unknown).
  virtual absl::StatusOr<NodePort> FreePort(const GangSlot& slot) = 0;
  // Unpacks the job's working directory on the slot's node.
  virtual absl::Status PrepareWorkingDir(const GangSlot& slot, const JobId& job_id,
                                         const std::string& archive) = 0;

  // Starts the rank's worker; errors name the node.
  virtual absl::StatusOr<StartedRank> StartRank(const RankLaunch& launch) = 0;
  // Streams the rank's output to `output` from its own thread until it exits; then `ended`.
  virtual std::unique_ptr<RankWatch> WatchRank(
      const StartedRank& rank, std::function<void(bool is_stderr, const std::string& data)> output,
      std::function<void(RankEnd end)> ended) = 0;
  // Sends `signal` to the rank's process group.
  virtual absl::Status SignalRank(const StartedRank& rank, int signal) = 0;
  // Writes to the stdin of a rank started with stdin_pipe: the bytes taken (the rest did not fit
  // now). Errors name the node.
  virtual absl::StatusOr<size_t> WriteStdin(const StartedRank& rank, const std::string& data,
                                            bool close) = 0;
  // Which of `nodes` the head has declared dead (or no longer knows): a machine that froze
  // without closing its connections ends no watch, so the controller asks.
  virtual absl::StatusOr<std::set<std::string>> DeadNodes(const std::set<std::string>& nodes) = 0;
};

}  // namespace tessera::train
