// Checks a JobSpec before anything is reserved or started (the head's job manager runs it on
// every SubmitJob): one InvalidArgument line naming the field, and nothing changes.
#pragma once

#include "absl/status/status.h"
#include "tessera/v1/jobs.pb.h"

namespace tessera::train {

absl::Status ValidateJobSpec(const v1::JobSpec& spec);

}  // namespace tessera::train
