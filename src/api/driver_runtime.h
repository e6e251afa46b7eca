// DriverRuntime: the process-wide state behind tessera::Init in a driver: the Owner service
// (workers say ready, fetch owned objects), the object table of owned values, the task submitter
// and the worker leases, and a reaper that lets idle workers go.
//
// Threading: thread-safe; Create and Shutdown are called by Init/Shutdown only.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "api/object_table.h"
#include "api/task_submitter.h"
#include "api/worker_leases.h"
#include "rpc/server.h"
#include "tessera/tessera.h"

namespace tessera::api {

class DriverRuntime {
 public:
  static absl::StatusOr<std::unique_ptr<DriverRuntime>> Create(const InitOptions& options);
  ~DriverRuntime();

  ObjectRefBase Submit(internal::AnyFunction fn, const TaskOptions& options,
                       std::vector<internal::TaskArgument> args);
  absl::StatusOr<std::string> Get(const ObjectRefBase& ref, absl::Duration timeout);
  std::vector<bool> Wait(const std::vector<const ObjectRefBase*>& refs, int num,
                         absl::Duration timeout);
  ObjectRefBase Put(std::string value);
  TaskStats stats() const { return submitter_->stats(); }
  void Shutdown();

  ObjectTable& objects() { return *objects_; }
  WorkerLeases& leases() { return *leases_; }

 private:
  DriverRuntime() = default;
  absl::StatusOr<LeaseShape> ShapeFor(const TaskOptions& options);
  ObjectRefBase MakeOwnedRef(const ObjectId& id);

  InitOptions options_;
  OwnerAddress owner_;
  std::shared_ptr<ObjectTable> objects_;
  std::unique_ptr<TaskSubmitter> submitter_;
  std::unique_ptr<WorkerLeases> leases_;
  std::unique_ptr<grpc::Service> owner_service_;
  std::unique_ptr<rpc::RpcServer> server_;
  TaskId driver_task_;
  std::atomic<uint32_t> puts_{0};

  absl::Mutex shapes_mu_;
  std::map<std::string, absl::StatusOr<LeaseShape>> shapes_ ABSL_GUARDED_BY(shapes_mu_);

  absl::Notification stop_reaper_;
  std::thread reaper_;
};

}  // namespace tessera::api
