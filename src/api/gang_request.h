// The job a program's GangOptions (include/tessera/gang.h) submit to the head's Jobs service,
// built from the typed options: the resources, the strategy and the label selectors go to the
// protocol through wire/, never as text to be parsed again (a slice's accelerator type and
// topology aside: they are still text, checked by client::TpuSliceAlternative). InvalidArgument
// when the options name no kind of placement or more than one; the rest is the job's own check
// (train/job_spec.h), made where it runs.
//
// Thread-safe: a pure function of its options (and a fresh request id).
#pragma once

#include "absl/status/statusor.h"
#include "tessera/gang.h"
#include "tessera/v1/jobs.pb.h"

namespace tessera::api {

absl::StatusOr<v1::SubmitJobRequest> GangRequest(const GangOptions& options);

}  // namespace tessera::api
