// StreamingGenerators: the owner's side of its streaming generator tasks (Ray's
// num_returns="streaming"). Each value such a task yields is reported by its worker as it is made
// (Owner.ReportGeneratorItem) and becomes an object of this owner, item `index` having the id
// ObjectId::ForTaskReturn(task, index + 2) (return 1 is the task's own outcome). The consumer
// takes the items in order (Next), each as soon as it is there; once the task has ended, Next
// past the last item says so, and a task that failed has one more item holding its failure, so
// reading it raises what the task raised. A retried run's items that are here already are
// ignored.
//
// Threading: thread-safe (one mutex; Next waits on it). The object table is called outside it.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "api/object_table.h"
#include "tessera/object_id.h"

namespace tessera::api {

class StreamingGenerators {
 public:
  explicit StreamingGenerators(ObjectTable* table) : table_(table) {}

  // `task` is a streaming generator of this owner.
  void Expect(const TaskId& task);
  bool IsGenerator(const TaskId& task) const;
  // Item `index` of `task`: NotFound when `task` is no generator of this owner (or its consumer
  // let it go); OK, changing nothing, for an item that is here already.
  absl::Status Report(const TaskId& task, int64_t index, std::string value);
  // `task` ended: OK after its last item, else its failure.
  void Finish(const TaskId& task, const absl::Status& outcome);
  // The object of item `index` once it is there, or nullopt when the task ended before yielding
  // it (after a failure, the item just past the last value is the failure).
  // DeadlineExceeded at `deadline`; NotFound for a task that is not a generator here.
  absl::StatusOr<std::optional<ObjectId>> Next(const TaskId& task, int64_t index,
                                               absl::Time deadline);
  // The consumer is done, having taken the items before `next_index`: the others are let go
  // (now, and as they arrive), and `task` is forgotten once it has ended.
  void Release(const TaskId& task, int64_t next_index);

  size_t size() const;

 private:
  struct Generator {
    int64_t received = 0;  // items 0..received-1 are in the table
    bool finished = false;
    bool failed = false;  // finished with a failure: item `received` holds it
    bool released = false;
  };
  static ObjectId ItemId(const TaskId& task, int64_t index);

  ObjectTable* const table_;
  mutable absl::Mutex mu_;
  absl::flat_hash_map<TaskId, Generator> generators_ ABSL_GUARDED_BY(mu_);
};

}  // namespace tessera::api
