#include "python/runtime_env_calls.h"

#include <pybind11/stl.h>

#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "node/working_dir.h"
#include "tessera/task.h"

namespace tessera::python {
namespace {

py::bytes Packed(absl::StatusOr<PackedDirectory> packed) {
  if (!packed.ok()) throw py::value_error(std::string(packed.status().message()));
  return py::bytes(packed->archive);
}

RuntimeEnvFiles::Package PackageOf(std::string archive, std::string entry) {
  if (absl::Status s = ValidateWorkingDirArchive(archive); !s.ok()) {
    throw py::value_error(std::string(s.message()));
  }
  RuntimeEnvFiles::Package package;
  package.id = WorkingDirContentId(archive);
  package.archive = std::move(archive);
  package.entry = std::move(entry);
  return package;
}

}  // namespace

void BindRuntimeEnvCalls(py::module_& m) {
  py::class_<RuntimeEnvFiles, std::shared_ptr<RuntimeEnvFiles>>(m, "RuntimeEnvFiles")
      .def_property_readonly("key", [](const RuntimeEnvFiles& files) { return files.key; })
      .def_property_readonly("ids", [](const RuntimeEnvFiles& files) {
        std::vector<std::string> ids;
        if (files.working_dir.has_value()) ids.push_back(files.working_dir->id);
        for (const auto& module : files.py_modules) ids.push_back(module.id);
        return ids;
      });
  m.attr("WORKING_DIR_MAX_FILE_BYTES") = kWorkingDirMaxFileBytes;
  m.def(
      "pack_directory",
      [](const std::string& path, const std::string& label, const std::string& under) {
        absl::StatusOr<PackedDirectory> packed;
        {
          py::gil_scoped_release release;
          packed = PackDirectory(path, kWorkingDirMaxFileBytes, label, under);
        }
        return Packed(std::move(packed));
      },
      py::arg("path"), py::arg("label"), py::arg("under") = "",
      "The folder packed as a DirectoryArchive (entries under `under` when given); ValueError, "
      "one line starting with `label`, when it cannot be or is over the limits.");
  m.def(
      "pack_file",
      [](const std::string& path, const std::string& label) {
        absl::StatusOr<PackedDirectory> packed;
        {
          py::gil_scoped_release release;
          packed = PackFile(path, kWorkingDirMaxFileBytes, label);
        }
        return Packed(std::move(packed));
      },
      py::arg("path"), py::arg("label"), "One file packed alone under its own name.");
  m.def(
      "runtime_env_files",
      [](std::optional<std::string> working_dir,
         std::vector<std::pair<std::string, std::string>> py_modules) {
        auto files = std::make_shared<RuntimeEnvFiles>();
        py::gil_scoped_release release;
        if (working_dir.has_value()) {
          files->working_dir = PackageOf(std::move(*working_dir), "");
          absl::StrAppend(&files->key, "wd=", files->working_dir->id, ";");
        }
        for (auto& [archive, entry] : py_modules) {
          files->py_modules.push_back(PackageOf(std::move(archive), std::move(entry)));
          absl::StrAppend(&files->key, "py=", files->py_modules.back().id, "/", entry.size(), ":",
                          files->py_modules.back().entry, ";");
        }
        return files;
      },
      py::arg("working_dir"), py::arg("py_modules"),
      "The options' runtime_env_files: the archives (working_dir, [(archive, entry on "
      "PYTHONPATH or '')]) under their content ids.");
}

}  // namespace tessera::python
