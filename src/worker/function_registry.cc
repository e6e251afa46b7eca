// The process-wide registry behind TESSERA_REMOTE (include/tessera/remote_function.h). It lives
// in the worker library because the worker is what looks functions up to run them; the driver
// only needs the name of a pointer.
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/mutex.h"
#include "objects/object_location.h"
#include "tessera/remote_function.h"
#include "tessera/serialization.h"
#include "worker/borrowed_refs.h"
#include "worker/worker_runtime.h"

namespace tessera::internal {
namespace {

struct Registry {
  absl::Mutex mu;
  // std::map: node addresses stay put, so pointers handed out remain valid (entries are never
  // removed).
  std::map<std::string, Invoker, std::less<>> invokers ABSL_GUARDED_BY(mu);
  std::map<AnyFunction, std::string> names ABSL_GUARDED_BY(mu);
};

// Constructed on first use: registrations run during static initialization, in any order.
Registry& TheRegistry() {
  static Registry* registry = new Registry();
  return *registry;
}

}  // namespace

bool RegisterFunction(const char* name, AnyFunction key, Invoker invoker) {
  Registry& r = TheRegistry();
  absl::MutexLock lock(&r.mu);
  auto it = r.names.find(key);
  if (it != r.names.end()) return true;  // the same function under a second name: keep the first
  if (r.invokers.count(name) > 0) {
    // Two functions would answer to one name: the program is wrong, and it is static init.
    std::fprintf(stderr, "tessera: TESSERA_REMOTE(%s) registers a second function named %s\n", name,
                 name);
    std::abort();
  }
  r.invokers.emplace(name, std::move(invoker));
  r.names.emplace(key, name);
  return true;
}

bool RegisterNamedInvoker(const char* name, Invoker invoker) {
  Registry& r = TheRegistry();
  absl::MutexLock lock(&r.mu);
  if (!r.invokers.emplace(name, std::move(invoker)).second) {
    std::fprintf(stderr, "tessera: %s is registered twice\n", name);
    std::abort();
  }
  return true;
}

const std::string* FindFunctionName(AnyFunction key) {
  Registry& r = TheRegistry();
  absl::MutexLock lock(&r.mu);
  auto it = r.names.find(key);
  return it == r.names.end() ? nullptr : &it->second;
}

const Invoker* FindInvoker(std::string_view name) {
  Registry& r = TheRegistry();
  absl::MutexLock lock(&r.mu);
  auto it = r.invokers.find(name);
  return it == r.invokers.end() ? nullptr : &it->second;
}

std::string RegisteredFunctionNames() {
  Registry& r = TheRegistry();
  absl::MutexLock lock(&r.mu);
  std::vector<std::string> names;
  for (const auto& [name, invoker] : r.invokers) names.push_back(name);
  return names.empty() ? "none" : absl::StrJoin(names, ", ");
}

void LendRefsInResult(const std::string& result) {
  const std::string& caller = worker::RunningTaskCallerOnThisThread();
  if (caller.empty() || !MayHoldObjectRefs(result)) return;  // not run as a task here
  worker::Lend(RefsInsideValue(result), caller);
}

}  // namespace tessera::internal
