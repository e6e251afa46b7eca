// What a task or an actor asks of the cluster, as types: TaskOptions and ActorOptions (the C++
// API's, and what the Python binding makes from Ray's keyword arguments), with the folders a
// worker runs with (RuntimeEnvFiles). Nothing here is text to be parsed later: resources are a
// ResourceSet, label selectors are parsed selectors, the strategy is one SchedulingStrategy.
//
// Values; not thread-safe.
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "labels/label_selector.h"
#include "resources/resource_set.h"
#include "vocabulary/scheduling_strategy.h"

namespace tessera {

// One CPU: what a task or an actor holds when nothing else is asked (Ray's num_cpus=1).
ResourceSet OneCpu();

// Folders a task's or actor's worker runs with (Ray's runtime_env working_dir and py_modules):
// each a packed DirectoryArchive under its content id (WorkingDirContentId, "env-<sha256>"),
// unpacked once per node by that node's agent and reused by every worker that names it. Made
// once (Python: per remote function or actor class and runtime_env) and shared, never copied per
// call.
struct RuntimeEnvFiles {
  struct Package {
    std::string id;       // the archive's content id
    std::string archive;  // serialized tessera.v1.DirectoryArchive
    // What goes on the worker's PYTHONPATH: the unpacked folder ("") or an entry in it (a zip).
    std::string entry;
  };
  std::optional<Package> working_dir;  // the worker's cwd, and first on its PYTHONPATH
  std::vector<Package> py_modules;     // then these, in order
  // The ids in order ("wd=<id>;py=<id>/<entry>;..."): part of the lease shape, so a worker
  // started with these folders serves only tasks that ask for the same.
  std::string key;
};

struct TaskOptions {
  // What one run of the task holds.
  ResourceSet resources = OneCpu();
  // The first is the request's, the rest are fallbacks tried in order.
  std::vector<LabelSelector> label_selectors;
  // Where it may run. Node affinity, hard: only there, and an error naming the node when it is
  // dead, unknown or can never fit the task; soft: there when it can take the task now, else
  // wherever else fits. Spread: each worker leased for this kind of task goes to the least used
  // node that fits, in turn, instead of packing onto the first.
  SchedulingStrategy strategy;
  // Runs again on a new worker when its worker dies, up to this many times (exceptions are not
  // retried: they are the task's answer).
  int max_retries = 3;
  // How many objects the task returns (Ray's num_returns; Python tasks): 1, the one result; N > 1,
  // the N values of the sequence it returns, each its own object; 0, none (the task still runs).
  int num_returns = 1;
  // A streaming generator (Ray's num_returns="streaming"; Python tasks): each value it yields
  // becomes an object as soon as it is made (internal::GeneratorNext); its ref is the task's
  // outcome. num_returns is then 1.
  bool streaming = false;
  // Retry the task's own exceptions too (within max_retries): any, when retry_exception_types
  // is empty, else only those whose type name is listed (C++: as the error names it, e.g.
  // "std::runtime_error").
  bool retry_exceptions = false;
  std::vector<std::string> retry_exception_types;
  // Added to the environment of the task's worker process (Ray's runtime_env env_vars); part of
  // the worker's shape. Tessera's own worker variables cannot be overridden.
  std::map<std::string, std::string> env;
  // The folders its worker runs with (nullptr none); part of the worker's shape.
  std::shared_ptr<const RuntimeEnvFiles> runtime_env_files;
};

struct ActorOptions {
  // What the actor's worker holds for its whole life.
  ResourceSet resources = OneCpu();
  // The first is the request's, the rest are fallbacks tried in order.
  std::vector<LabelSelector> label_selectors;
  // Where it lives, as for tasks (TaskOptions::strategy); a hard node affinity holds for its
  // restarts too.
  SchedulingStrategy strategy;
  // "" unnamed; else GetActor<T>(name) finds it, in this driver or (through the head's actor
  // directory) in another driver of the cluster. Unique among the cluster's live actors: a
  // create with a name another live actor holds fails AlreadyExists naming that actor. The name
  // is free again once the actor is dead (killed, out of restarts, its node or owner gone).
  std::string name;
  // As Ray's lifetime="detached" (the actor must be named): it outlives this driver. While this
  // driver lives it owns the actor (restarts it, ends it when asked); once this driver exits or
  // falls silent, the actor lives on with no owner, found by name from other drivers, until
  // Kill from any of them or its process dies (it is not restarted then). Without detached, the
  // actor dies with this driver.
  bool detached = false;
  // Restarts after its process dies (0: the first death is final).
  int max_restarts = 0;
  // Times a call running when the process died is run again on the restarted actor.
  int max_task_retries = 0;
  // Calls run at once in the actor's process (1: one at a time, in submission order).
  int max_concurrency = 1;
  // Named concurrency groups (Python actors, as Ray's concurrency_groups): each group's calls
  // run on its own pool (or under its own limit on an async actor's loop), up to that many at
  // once, beside the default group's max_concurrency. Each limit must be >= 1.
  std::map<std::string, int> concurrency_groups;
  // The namespace the name is unique in ("" the default one).
  std::string name_space;
  // Added to the environment of the actor's worker process (a gang rank's RANK, MASTER_ADDR...);
  // Tessera's own worker variables cannot be overridden.
  std::map<std::string, std::string> env;
  // The folders its worker runs with (Ray's working_dir, py_modules; nullptr none).
  std::shared_ptr<const RuntimeEnvFiles> runtime_env_files;
  // A named actor's: what a handle found by name elsewhere is built with, as the creating
  // language writes it (Python: its methods and their options); kept in the head's record, at
  // most 64 KiB, opaque to the runtime.
  std::string handle_metadata;
};

}  // namespace tessera
