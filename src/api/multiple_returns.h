// MultipleReturns: the owner's record of its tasks that return several objects (num_returns
// N > 1), and the delivery of such a task's outcome into its N objects (ids 1..N of the task):
// the worker's encoded values (objects/task_returns.h) split one per object, or one error for
// all of them. Tasks with one return are delivered as they are.
//
// Threading: thread-safe (one mutex, never held while the table is called).
#pragma once

#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "api/object_table.h"
#include "tessera/object_id.h"

namespace tessera::api {

class MultipleReturns {
 public:
  explicit MultipleReturns(ObjectTable* table) : table_(table) {}

  // The task whose first return is `first` returns `count` objects (count > 1; the table has
  // them pending).
  void Expect(const ObjectId& first, int count);
  // Completes `first`'s task's objects with its outcome. False when they already had one.
  bool Deliver(const ObjectId& first, absl::StatusOr<std::string> value);

 private:
  ObjectTable* const table_;
  absl::Mutex mu_;
  absl::flat_hash_map<ObjectId, int> counts_ ABSL_GUARDED_BY(mu_);
};

}  // namespace tessera::api
