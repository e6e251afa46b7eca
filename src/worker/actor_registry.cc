// The actor parts of the process-wide registry (include/tessera/actor.h): the names of actor
// methods by their member-pointer bytes, and the one actor instance a worker process hosts.
#include <map>
#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "tessera/actor.h"

namespace tessera::internal {
namespace {

struct ActorRegistry {
  absl::Mutex mu;
  // std::map: pointers to names stay valid (entries are never removed).
  std::map<std::string, std::string> method_names ABSL_GUARDED_BY(mu);
  std::shared_ptr<void> instance ABSL_GUARDED_BY(mu);
  std::string type_name ABSL_GUARDED_BY(mu);
};

ActorRegistry& TheActorRegistry() {
  static ActorRegistry* registry = new ActorRegistry();
  return *registry;
}

}  // namespace

bool RegisterActorMethodName(std::string key, const char* name) {
  ActorRegistry& r = TheActorRegistry();
  absl::MutexLock lock(&r.mu);
  r.method_names.emplace(std::move(key), name);
  return true;
}

const std::string* FindActorMethodName(const std::string& key) {
  ActorRegistry& r = TheActorRegistry();
  absl::MutexLock lock(&r.mu);
  auto it = r.method_names.find(key);
  return it == r.method_names.end() ? nullptr : &it->second;
}

void SetActorInstance(std::shared_ptr<void> instance, const char* type_name) {
  ActorRegistry& r = TheActorRegistry();
  absl::MutexLock lock(&r.mu);
  r.instance = std::move(instance);
  r.type_name = type_name;
}

std::shared_ptr<void> ActorInstance(const char* type_name, std::string* why) {
  ActorRegistry& r = TheActorRegistry();
  absl::MutexLock lock(&r.mu);
  if (r.instance == nullptr) {
    *why = "this process hosts no actor instance (its constructor failed or never ran)";
    return nullptr;
  }
  if (r.type_name != type_name) {
    *why = "the actor in this process is of another class";
    return nullptr;
  }
  return r.instance;
}

}  // namespace tessera::internal
