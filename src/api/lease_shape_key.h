// LeaseShapeKey: what makes two tasks' workers interchangeable (the driver's cache of lease
// shapes is keyed by it): their resources, label selectors, scheduling strategy, worker
// environment and runtime folders, compared as the vocabulary's values (no text is made for it).
// A TaskOptions is looked up without building a key (LeaseShapeKeyLess is transparent).
//
// Threading: values; not thread-safe.
#pragma once

#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "vocabulary/task_options.h"

namespace tessera::api {

struct LeaseShapeKey {
  ResourceSet resources;
  std::vector<LabelSelector> label_selectors;
  SchedulingStrategy strategy;
  std::map<std::string, std::string> env;
  std::string files;  // RuntimeEnvFiles::key ("" none)

  static LeaseShapeKey Of(const TaskOptions& options);
};

struct LeaseShapeKeyLess {
  using is_transparent = void;
  template <typename A, typename B>
  bool operator()(const A& a, const B& b) const {
    return Fields(a) < Fields(b);
  }
  static const std::string& FilesKey(const TaskOptions& options);

 private:
  static auto Fields(const LeaseShapeKey& key) {
    return std::tie(key.resources, key.label_selectors, key.strategy, key.env, key.files);
  }
  static auto Fields(const TaskOptions& options) {
    return std::tie(options.resources, options.label_selectors, options.strategy, options.env,
                    FilesKey(options));
  }
};

}  // namespace tessera::api
