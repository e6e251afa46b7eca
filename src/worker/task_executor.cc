#include "worker/task_executor.h"

#include <cxxabi.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <exception>
#include <memory>
#include <typeinfo>

#include "absl/strings/str_cat.h"
#include "tessera/remote_function.h"
#include "tessera/serialization.h"

namespace tessera::worker {
namespace {

v1::TaskResult Failure(const v1::TaskSpec& spec, std::string kind, std::string type,
                       std::string message) {
  v1::TaskResult result;
  result.set_task_id(spec.task_id());
  v1::TaskError* error = result.mutable_error();
  error->set_kind(std::move(kind));
  error->set_type(std::move(type));
  error->set_message(std::move(message));
  return result;
}

}  // namespace

std::string CurrentExceptionTypeName() {
  const std::type_info* type = abi::__cxa_current_exception_type();
  if (type == nullptr) return "unknown";
  int status = 0;
  std::unique_ptr<char, void (*)(void*)> demangled(
      abi::__cxa_demangle(type->name(), nullptr, nullptr, &status), std::free);
  return status == 0 && demangled != nullptr ? std::string(demangled.get()) : type->name();
}

std::optional<v1::TaskResult> RefuseOtherLanguage(const v1::TaskSpec& spec, v1::Language language,
                                                  const char* worker_language) {
  if (spec.language() == language) return std::nullopt;
  return Failure(
      spec, "invalid", "",
      absl::StrCat("task ", spec.function(), " is written in ", v1::Language_Name(spec.language()),
                   " and this is a ", worker_language, " worker"));
}

v1::TaskResult ExecuteTask(const v1::TaskSpec& spec, const ArgumentFetcher& fetch) {
  if (auto refused = RefuseOtherLanguage(spec, v1::LANGUAGE_CPP, "C++")) return *refused;
  const internal::Invoker* invoker = internal::FindInvoker(spec.function());
  if (invoker == nullptr) {
    return Failure(
        spec, "invalid", "",
        absl::StrCat("function ", spec.function(), " is not registered in the worker (registered: ",
                     internal::RegisteredFunctionNames(), ")"));
  }
  // The arguments as one msgpack array: a header, then each value's bytes as they came.
  std::string args;
  {
    serialization_internal::StringWriter writer{&args};
    msgpack::packer<serialization_internal::StringWriter> packer(writer);
    packer.pack_array(static_cast<uint32_t>(spec.args_size()));
  }
  for (int i = 0; i < spec.args_size(); ++i) {
    const v1::TaskArg& arg = spec.args(i);
    if (arg.has_ref()) {
      auto value = fetch(arg.ref());
      if (!value.ok()) {
        return Failure(spec, "invalid", "",
                       absl::StrCat("argument ", i, ": ", value.status().message()));
      }
      args += value->view();
    } else {
      args += arg.value();
    }
  }

  const auto start = std::chrono::steady_clock::now();
  v1::TaskResult result;
  try {
    absl::StatusOr<std::string> value = (*invoker)(args);
    if (!value.ok()) {
      result =
          Failure(spec, "invalid", "",
                  absl::StrCat("arguments of ", spec.function(), ": ", value.status().message()));
    } else {
      result.set_task_id(spec.task_id());
      result.set_value(*std::move(value));
    }
  } catch (const std::exception& e) {
    result = Failure(spec, "application", CurrentExceptionTypeName(), e.what());
  } catch (...) {
    result = Failure(spec, "application", CurrentExceptionTypeName(), "");
  }
  if (result.has_error() && result.error().kind() == "application" && spec.retry_exceptions()) {
    const auto& types = spec.retry_exception_types();
    result.mutable_error()->set_retryable(
        types.empty() ||
        std::find(types.begin(), types.end(), result.error().type()) != types.end());
  }
  result.set_run_nanos(
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - start)
          .count());
  return result;
}

}  // namespace tessera::worker
