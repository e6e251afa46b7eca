// HeadService: the parts and the six services put together, and what the head's other pieces
// call in process (restore, the periodic checks, the in-process cluster head).
#include "head/head_service.h"

#include <memory>
#include <utility>

#include "base/status_macros.h"
#include "head/in_process_cluster_head.h"

namespace tessera {

HeadService::HeadService(HeadServiceOptions options)
    : parts_(std::move(options)),
      nodes_(parts_),
      reservations_(parts_),
      actors_(parts_),
      jobs_(parts_),
      kv_(parts_),
      admin_(parts_) {}

HeadService::~HeadService() = default;

void HeadService::Tick() {
  parts_.CheckHealth();
  parts_.Reconcile(/*wait=*/true);
}

absl::Status HeadService::Restore() {
  TESSERA_RETURN_IF_ERROR(parts_.RestoreCluster());
  reservations_.RememberRestoredCreates();
  return parts_.RestoreJobsAndActors();
}

std::unique_ptr<train::ClusterHead> HeadService::InProcessHead() {
  return std::make_unique<InProcessClusterHead>(parts_.clock, &parts_.controller);
}

}  // namespace tessera
