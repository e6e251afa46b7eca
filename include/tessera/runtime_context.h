// What a task can learn about where it runs (GetRuntimeContext(), inside a task). In a driver,
// after Init: node_id is the driver's local node (the one whose agent and object store it uses,
// "" when this host runs none), as Ray's driver reports its local node; the rest is empty.
//
// Threading: in a worker the context is set before the first task runs and never changes; in a
// driver each Init sets it. Read it from any thread.
#pragma once

#include <map>
#include <string>
#include <vector>

namespace tessera {

struct RuntimeContext {
  // True inside a worker (a task runs here); false in a driver.
  bool in_worker = false;
  std::string node_id;
  std::string worker_id;
  // Device instances of the worker's lease per resource ("GPU" -> {0, 1}): exactly the devices
  // the isolation variables (CUDA_VISIBLE_DEVICES, TPU_VISIBLE_CHIPS, ...) make visible.
  std::map<std::string, std::vector<int>> accelerator_ids;
  // The isolation variables the lease set ("CUDA_VISIBLE_DEVICES" -> "0,1").
  std::map<std::string, std::string> isolation_env;
  std::map<std::string, std::string> node_labels;
};

const RuntimeContext& GetRuntimeContext();

}  // namespace tessera
