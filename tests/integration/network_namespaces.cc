#include "integration/network_namespaces.h"

#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>

#include "absl/strings/str_cat.h"

namespace tessera::testing {
namespace {

int Sh(const std::string& command) {
  const int status = std::system(command.c_str());
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

}  // namespace

NetworkNamespaces::NetworkNamespaces() : tag_(absl::StrCat(getpid() % 100000)) {}

NetworkNamespaces::~NetworkNamespaces() {
  for (const std::string& ns : namespaces_) Sh(absl::StrCat("ip netns del ", ns, " 2>/dev/null"));
  for (const std::string& link : links_) Sh(absl::StrCat("ip link del ", link, " 2>/dev/null"));
}

std::string NetworkNamespaces::Why() {
  if (geteuid() != 0) return "needs root to create network namespaces";
  if (Sh("ip -V >/dev/null 2>&1") != 0) return "the `ip` command (iproute2) is missing";
  const std::string probe = absl::StrCat("tsp", getpid() % 100000);
  if (Sh(absl::StrCat("ip netns add ", probe, " 2>/dev/null")) != 0) {
    return "`ip netns add` is not permitted here";
  }
  Sh(absl::StrCat("ip netns del ", probe));
  return "";
}

absl::StatusOr<VethNamespace> NetworkNamespaces::Add(int index) {
  VethNamespace made;
  made.name = absl::StrCat("ts", tag_, "n", index);
  const std::string host_if = absl::StrCat("tsh", tag_, index);
  const std::string ns_if = absl::StrCat("tsn", tag_, index);
  const std::string subnet = absl::StrCat("10.", 200 + index, ".", getpid() % 250, ".");
  made.host_ip = subnet + "1";
  made.inside_ip = subnet + "2";
  if (Sh(absl::StrCat("ip netns add ", made.name)) != 0) {
    return absl::InternalError(absl::StrCat("ip netns add ", made.name, " failed"));
  }
  namespaces_.push_back(made.name);
  if (Sh(absl::StrCat("ip link add ", host_if, " type veth peer name ", ns_if)) != 0) {
    return absl::InternalError(absl::StrCat("ip link add ", host_if, " failed"));
  }
  links_.push_back(host_if);
  const std::string in = absl::StrCat("ip netns exec ", made.name, " ");
  if (Sh(absl::StrCat("ip link set ", ns_if, " netns ", made.name, " && ip addr add ", made.host_ip,
                      "/24 dev ", host_if, " && ip link set ", host_if, " up && ", in,
                      "ip addr add ", made.inside_ip, "/24 dev ", ns_if, " && ", in, "ip link set ",
                      ns_if, " up && ", in, "ip link set lo up")) != 0) {
    return absl::InternalError(absl::StrCat("configuring the veth pair of ", made.name, " failed"));
  }
  return made;
}

}  // namespace tessera::testing
