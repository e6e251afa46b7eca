#include "process/launch_spec.h"

#include <cstdint>

#include "absl/strings/str_cat.h"
#include "process/launch_wire.h"

namespace tessera {
namespace {

void AppendU32(std::string& out, uint32_t value) {
  unsigned char bytes[4];
  launch_wire::StoreU32(bytes, value);
  out.append(reinterpret_cast<const char*>(bytes), sizeof(bytes));
}

void AppendString(std::string& out, const std::string& s) {
  AppendU32(out, static_cast<uint32_t>(s.size()));
  out.append(s);
  out.push_back('\0');
}

void AppendList(std::string& out, const std::vector<std::string>& list) {
  AppendU32(out, static_cast<uint32_t>(list.size()));
  for (const std::string& s : list) AppendString(out, s);
}

}  // namespace

LaunchSpec LaunchSpecFromChild(const ChildSpec& spec) {
  LaunchSpec launch;
  launch.argv = spec.argv;
  launch.env.reserve(spec.env.size());
  for (const auto& [key, value] : spec.env) launch.env.push_back(absl::StrCat(key, "=", value));
  launch.cwd = spec.cwd;
  launch.stdout_path = spec.stdout_path;
  launch.stderr_path = spec.stderr_path;
  launch.stdin_path = spec.stdin_path;
  return launch;
}

std::string EncodeLaunchSpec(const LaunchSpec& spec) {
  std::string out(launch_wire::kSpecHeaderBytes, '\0');
  AppendList(out, spec.argv);
  AppendList(out, spec.env);
  AppendString(out, spec.cwd);
  AppendString(out, spec.stdout_path);
  AppendString(out, spec.stderr_path);
  AppendString(out, spec.stdin_path);
  auto* header = reinterpret_cast<unsigned char*>(out.data());
  launch_wire::StoreU32(header, launch_wire::kSpecMagic);
  launch_wire::StoreU32(header + 4, launch_wire::kSpecVersion);
  launch_wire::StoreU32(header + 8,
                        static_cast<uint32_t>(out.size() - launch_wire::kSpecHeaderBytes));
  return out;
}

absl::StatusOr<LaunchSpec> DecodeLaunchSpec(std::string_view bytes) {
  std::string copy(bytes);  // parsed in place
  launch_wire::SpecView view;
  char error[256];
  if (!launch_wire::ParseSpec(copy.data(), copy.size(), &view, error, sizeof(error))) {
    return absl::InvalidArgumentError(error);
  }
  LaunchSpec spec;
  spec.argv.assign(view.argv, view.argv + view.argc);
  spec.env.assign(view.envp, view.envp + view.envc);
  spec.cwd = view.cwd;
  spec.stdout_path = view.stdout_path;
  spec.stderr_path = view.stderr_path;
  spec.stdin_path = view.stdin_path;
  launch_wire::FreeSpecView(&view);
  return spec;
}

}  // namespace tessera
