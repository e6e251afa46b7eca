// Network namespaces joined to this one by veth pairs, for tests that run node agents (and their
// workers) behind real network interfaces instead of loopback. Needs root and iproute2; Why()
// says why they cannot be made here, so a test can skip with that reason.
// Not thread-safe; everything made is deleted by the destructor.
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace tessera::testing {

struct VethNamespace {
  std::string name;       // the namespace (`ip netns exec <name> ...`)
  std::string host_ip;    // this namespace's end of the pair
  std::string inside_ip;  // the namespace's end, where an agent there binds
};

class NetworkNamespaces {
 public:
  NetworkNamespaces();
  ~NetworkNamespaces();
  NetworkNamespaces(const NetworkNamespaces&) = delete;
  NetworkNamespaces& operator=(const NetworkNamespaces&) = delete;

  // "" when namespaces can be made here, else why not (not root, no `ip`, not permitted).
  static std::string Why();

  // A new namespace `index` (1..9) on its own /24, with loopback up.
  absl::StatusOr<VethNamespace> Add(int index);

 private:
  std::string tag_;
  std::vector<std::string> namespaces_;
  std::vector<std::string> links_;
};

}  // namespace tessera::testing
