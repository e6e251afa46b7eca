#include "api/streaming_generators.h"

#include <utility>

#include "absl/strings/str_cat.h"

namespace tessera::api {

ObjectId StreamingGenerators::ItemId(const TaskId& task, int64_t index) {
  return ObjectId::ForTaskReturn(task, static_cast<uint32_t>(index + 2));
}

void StreamingGenerators::Expect(const TaskId& task) {
  absl::MutexLock lock(&mu_);
  generators_[task];
}

bool StreamingGenerators::IsGenerator(const TaskId& task) const {
  absl::MutexLock lock(&mu_);
  return generators_.contains(task);
}

absl::Status StreamingGenerators::Report(const TaskId& task, int64_t index, std::string value) {
  if (index < 0 || index > int64_t{0x7ffffff0}) {
    return absl::InvalidArgumentError(
        absl::StrCat("generator item index ", index, " is out of range"));
  }
  bool duplicate = false;
  {
    absl::MutexLock lock(&mu_);
    auto it = generators_.find(task);
    if (it == generators_.end() || it->second.released) {
      return absl::NotFoundError(absl::StrCat("task ", task.Hex(),
                                              " is no streaming generator of this owner "
                                              "(or its consumer let it go)"));
    }
    Generator& generator = it->second;
    if (index < generator.received || generator.finished) {
      duplicate = true;  // a retried run's item: what it lent this owner goes back
    }
    if (index > generator.received) {
      return absl::FailedPreconditionError(absl::StrCat("generator item ", index, " of task ",
                                                        task.Hex(), " came before item ",
                                                        generator.received));
    }
    if (!duplicate) {
      // Added under the lock, so that Next never sees `received` ahead of the table.
      table_->AddValue(ItemId(task, index), std::move(value));
      ++generator.received;
    }
  }
  if (duplicate) table_->Discard(value);
  return absl::OkStatus();
}

void StreamingGenerators::Finish(const TaskId& task, const absl::Status& outcome) {
  absl::MutexLock lock(&mu_);
  auto it = generators_.find(task);
  if (it == generators_.end() || it->second.finished) return;
  Generator& generator = it->second;
  generator.finished = true;
  if (!outcome.ok() && !generator.released) {
    generator.failed = true;
    const ObjectId failure = ItemId(task, generator.received);
    table_->AddPending(failure);
    table_->Complete(failure, outcome);
  }
  if (generator.released) generators_.erase(it);
}

absl::StatusOr<std::optional<ObjectId>> StreamingGenerators::Next(const TaskId& task, int64_t index,
                                                                  absl::Time deadline) {
  absl::MutexLock lock(&mu_);
  auto has_news = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    auto it = generators_.find(task);
    return it == generators_.end() || it->second.finished || index < it->second.received;
  };
  mu_.AwaitWithDeadline(absl::Condition(&has_news), deadline);
  auto it = generators_.find(task);
  if (it == generators_.end()) {
    return absl::NotFoundError(
        absl::StrCat("task ", task.Hex(), " is no streaming generator here"));
  }
  const Generator& generator = it->second;
  if (index < generator.received) return std::optional<ObjectId>(ItemId(task, index));
  if (!generator.finished) {
    return absl::DeadlineExceededError(
        absl::StrCat("generator task ", task.Hex(), " has not yielded item ", index, " yet"));
  }
  if (generator.failed && index == generator.received) {
    return std::optional<ObjectId>(ItemId(task, index));
  }
  return std::optional<ObjectId>();
}

void StreamingGenerators::Release(const TaskId& task, int64_t next_index) {
  std::vector<ObjectId> unread;
  {
    absl::MutexLock lock(&mu_);
    auto it = generators_.find(task);
    if (it == generators_.end()) return;
    Generator& generator = it->second;
    const int64_t last = generator.received + (generator.failed ? 1 : 0);
    for (int64_t i = std::max<int64_t>(next_index, 0); i < last; ++i)
      unread.push_back(ItemId(task, i));
    generator.released = true;
    if (generator.finished) generators_.erase(it);
  }
  for (const ObjectId& id : unread) table_->Release(id);
}

size_t StreamingGenerators::size() const {
  absl::MutexLock lock(&mu_);
  return generators_.size();
}

}  // namespace tessera::api
