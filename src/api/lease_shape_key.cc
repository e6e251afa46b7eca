#include "api/lease_shape_key.h"

namespace tessera::api {

LeaseShapeKey LeaseShapeKey::Of(const TaskOptions& options) {
  return LeaseShapeKey{options.resources, options.label_selectors, options.strategy, options.env,
                       LeaseShapeKeyLess::FilesKey(options)};
}

const std::string& LeaseShapeKeyLess::FilesKey(const TaskOptions& options) {
  static const std::string* const kNone = new std::string();
  return options.runtime_env_files == nullptr ? *kNone : options.runtime_env_files->key;
}

}  // namespace tessera::api
