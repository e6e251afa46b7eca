// Runs one pushed task in this process: resolves its arguments (inline values as they are,
// ObjectRef arguments through `fetch`), calls the registered function and turns what happened
// into a TaskResult: the serialized value, or an error naming the exception's type and message
// (std::exception and anything else thrown), or an "invalid" error when the task cannot run here
// (unknown function, arguments that do not match its parameters).
//
// Threading: reentrant; the registry it reads is thread-safe.
#pragma once

#include <functional>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "tessera/tessera.h"
#include "tessera/v1/worker.pb.h"

namespace tessera::worker {

// An ObjectRef argument's bytes: owned, or a pinned view of the node's store (a large value is
// then copied once, into the call's argument buffer).
using ArgumentFetcher =
    std::function<absl::StatusOr<internal::SerializedValue>(const v1::ObjectRefProto& ref)>;

v1::TaskResult ExecuteTask(const v1::TaskSpec& spec, const ArgumentFetcher& fetch);

// The "invalid" result of a task written in another language than this worker's
// (`worker_language`: "C++", "Python"), or nullopt when the task is of that language.
std::optional<v1::TaskResult> RefuseOtherLanguage(const v1::TaskSpec& spec, v1::Language language,
                                                  const char* worker_language);

// The readable name of the exception being handled (inside a catch block), e.g.
// "std::runtime_error"; "unknown" when there is none.
std::string CurrentExceptionTypeName();

}  // namespace tessera::worker
