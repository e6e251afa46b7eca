#include "train/job_changes.h"

#include "absl/strings/str_cat.h"
#include "base/string_util.h"
#include "rpc/state_names.h"

namespace tessera::train {

std::vector<std::pair<std::string, std::string>> JobChanges(const v1::JobStatus& before,
                                                            const v1::JobStatus& after) {
  std::vector<std::pair<std::string, std::string>> changes;
  const std::string job = after.name().empty()
                              ? absl::StrCat("job ", after.job_id())
                              : absl::StrCat("job ", after.job_id(), " (", after.name(), ")");
  if (after.state() != before.state()) {
    changes.emplace_back("job", absl::StrCat(job, " ", ToAbsl(rpc::GangJobStateName(after.state())),
                                             after.message().empty() ? "" : ": ", after.message()));
  }
  const absl::string_view failed_word = ToAbsl(rpc::RankStateName(v1::RANK_STATE_FAILED));
  int failed = 0;
  for (const v1::RankStatus& rank : after.ranks()) {
    if (rank.state() != v1::RANK_STATE_FAILED) continue;
    const bool known = rank.rank() < before.ranks_size() &&
                       before.ranks(rank.rank()).attempt() == rank.attempt() &&
                       before.ranks(rank.rank()).state() == v1::RANK_STATE_FAILED;
    if (known) continue;
    if (++failed > kMaxRankEvents) continue;
    changes.emplace_back(
        "worker",
        absl::StrCat("job ", after.job_id(), " rank ", rank.rank(), " on node ", rank.node_id(),
                     " ", failed_word, rank.exit_reason().empty() ? "" : ": ", rank.exit_reason()));
  }
  if (failed > kMaxRankEvents) {
    changes.emplace_back("worker",
                         absl::StrCat("job ", after.job_id(), ": ", failed - kMaxRankEvents,
                                      " more ranks ", failed_word));
  }
  return changes;
}

}  // namespace tessera::train
