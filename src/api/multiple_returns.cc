#include "api/multiple_returns.h"

#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "objects/task_returns.h"

namespace tessera::api {

void MultipleReturns::Expect(const ObjectId& first, int count) {
  absl::MutexLock lock(&mu_);
  counts_[first] = count;
}

bool MultipleReturns::Deliver(const ObjectId& first, absl::StatusOr<std::string> value) {
  int count = 1;
  {
    absl::MutexLock lock(&mu_);
    auto it = counts_.find(first);
    if (it != counts_.end()) {
      count = it->second;
      counts_.erase(it);
    }
  }
  if (count == 1) return table_->Complete(first, std::move(value));
  const TaskId task = first.task_id();
  absl::StatusOr<std::vector<std::string>> values =
      value.ok() ? DecodeTaskReturns(*value, static_cast<size_t>(count)) : value.status();
  bool delivered = false;
  for (int i = 1; i <= count; ++i) {
    const ObjectId id = ObjectId::ForTaskReturn(task, static_cast<uint32_t>(i));
    delivered |=
        table_->Complete(id, values.ok() ? absl::StatusOr<std::string>(std::move((*values)[i - 1]))
                                         : absl::StatusOr<std::string>(values.status()));
  }
  return delivered;
}

}  // namespace tessera::api
