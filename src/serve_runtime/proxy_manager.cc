// The proxies of the nodes (proxy_manager.h): which nodes get one, their health checks, drains,
// restarts, and the adoption of a previous controller's.
#include "serve_runtime/proxy_manager.h"

#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "base/log_line.h"

namespace tessera::serve {

namespace {

constexpr char kEveryNode[] = "EveryNode";
// The proxy actor's methods (python/tessera/serve/proxy.py).
constexpr char kCheckHealth[] = "check_health";
constexpr char kIsDrained[] = "is_drained";
constexpr char kStartDraining[] = "start_draining";
constexpr char kStopDraining[] = "stop_draining";

// The port of a "host:port" address (0 when it names none).
int PortOf(const std::string& address) {
  const size_t colon = address.rfind(':');
  int port = 0;
  if (colon == std::string::npos || !absl::SimpleAtoi(address.substr(colon + 1), &port)) return 0;
  return port;
}

absl::Status CheckOptions(const ProxyManagerOptions& options) {
  if (options.clock == nullptr || options.runtime == nullptr || !options.list_nodes) {
    return absl::InvalidArgumentError("a proxy manager needs a clock, a runtime and a node list");
  }
  if (options.node_list_period <= absl::ZeroDuration() ||
      options.health_check_period <= absl::ZeroDuration() ||
      options.health_check_timeout <= absl::ZeroDuration() ||
      options.restart_backoff <= absl::ZeroDuration() ||
      options.min_draining_period < absl::ZeroDuration()) {
    return absl::InvalidArgumentError(
        "a proxy manager's node_list_period, health_check_period, health_check_timeout and "
        "restart_backoff must be positive, its min_draining_period not negative");
  }
  if (options.unhealthy_threshold < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("a proxy manager's unhealthy_threshold must be at least 1, got ",
                     options.unhealthy_threshold));
  }
  return absl::OkStatus();
}

}  // namespace

std::string HostOfAddress(const std::string& address) {
  if (!address.empty() && address.front() == '[') {
    const size_t close = address.find(']');
    if (close != std::string::npos) return address.substr(1, close - 1);
  }
  const size_t colon = address.rfind(':');
  // One colon is a port's; more without brackets is an IPv6 address alone.
  if (colon == std::string::npos || address.find(':') != colon) return address;
  return address.substr(0, colon);
}

ProxyManager::ProxyManager(ProxyManagerOptions options)
    : options_(std::move(options)), anchor_(std::make_shared<Anchor>()) {}

absl::StatusOr<std::unique_ptr<ProxyManager>> ProxyManager::Create(ProxyManagerOptions options) {
  if (absl::Status checked = CheckOptions(options); !checked.ok()) return checked;
  std::unique_ptr<ProxyManager> manager(new ProxyManager(std::move(options)));
  manager->anchor_->Attach(manager.get());
  return manager;
}

ProxyManager::~ProxyManager() { anchor_->Detach(); }

// --- Update -----------------------------------------------------------------------------------

void ProxyManager::Update(const std::optional<v1::ServeStartOptions>& start,
                          const std::set<std::string>& replica_nodes) {
  Actions actions;
  {
    absl::MutexLock lock(&mu_);
    if (!start.has_value() || start->proxy_location() != kEveryNode) {
      StopAllLocked(actions);
    } else {
      start_ = *start;
      const absl::Time now = options_.clock->Now();
      RefreshNodesLocked(now);
      if (listed_) ReconcileLocked(replica_nodes, now, actions);
    }
  }
  for (const std::function<void()>& action : actions) action();
}

void ProxyManager::RefreshNodesLocked(absl::Time now) {
  if (now < next_list_) return;
  next_list_ = now + options_.node_list_period;
  absl::StatusOr<std::vector<ServeNode>> nodes = options_.list_nodes();
  if (!nodes.ok()) {
    // The last list stands: no proxy is dropped for a node the head could not list.
    if (!list_failing_) {
      LogLine(absl::StrCat("serve controller: cannot list the nodes for the proxies: ",
                           nodes.status().message()));
    }
    list_failing_ = true;
    return;
  }
  list_failing_ = false;
  alive_.clear();
  for (ServeNode& node : *nodes) alive_[node.node_id] = std::move(node.host);
  listed_ = true;
}

void ProxyManager::StopAllLocked(Actions& actions) {
  for (const auto& [node_id, proxy] : proxies_) KillLocked(node_id, actions);
  proxies_.clear();
  // A Serve started again looks for proxies left behind as a new controller would.
  looked_up_.clear();
}

void ProxyManager::ReconcileLocked(const std::set<std::string>& replica_nodes, absl::Time now,
                                   Actions& actions) {
  for (auto it = proxies_.begin(); it != proxies_.end();) {
    // A node gone from the table takes its proxy with it.
    const bool keep =
        alive_.contains(it->first) &&
        StepLocked(it->first, it->second, replica_nodes.contains(it->first), now, actions);
    if (keep) {
      ++it;
      continue;
    }
    KillLocked(it->first, actions);
    it = proxies_.erase(it);
  }
  for (const auto& [node_id, host] : alive_) {
    if (proxies_.contains(node_id)) continue;
    if (replica_nodes.contains(node_id)) {
      Proxy& proxy = proxies_[node_id];
      proxy.host = host;
      proxy.port = PortForLocked(node_id, host);
      StartLocked(node_id, proxy, /*replace=*/false, actions);
    } else if (looked_up_.insert(node_id).second) {
      FindLocked(node_id, actions);
    }
  }
}

bool ProxyManager::StepLocked(const std::string& node_id, Proxy& proxy, bool wanted, absl::Time now,
                              Actions& actions) {
  if (!wanted && proxy.status != ProxyStatus::kDraining) {
    // One that serves drains; one that serves nothing yet (starting, failed) is ended.
    if (proxy.status != ProxyStatus::kHealthy) return false;
    proxy.status = ProxyStatus::kDraining;
    proxy.next_check = now + options_.min_draining_period;
  } else if (wanted && proxy.status == ProxyStatus::kDraining) {
    proxy.status = ProxyStatus::kHealthy;
    proxy.next_check = now;
  }
  if (proxy.status == ProxyStatus::kUnhealthy) {
    if (!proxy.starting && now >= proxy.restart_at) {
      StartLocked(node_id, proxy, /*replace=*/true, actions);
    }
    return true;
  }
  if (proxy.status != ProxyStatus::kHealthy && proxy.status != ProxyStatus::kDraining) {
    return true;  // STARTING: its start answers
  }
  if (proxy.calling) return true;
  const bool draining = proxy.status == ProxyStatus::kDraining;
  if (draining != proxy.actor_draining) {
    CallLocked(node_id, proxy, draining ? kStartDraining : kStopDraining, actions);
  } else if (now >= proxy.next_check) {
    CallLocked(node_id, proxy, draining ? kIsDrained : kCheckHealth, actions);
  }
  return true;
}

int ProxyManager::PortForLocked(const std::string& node_id, const std::string& host) const {
  const int wanted = start_.http_port();
  if (wanted == 0) return 0;
  const std::string head_host = options_.head_host ? options_.head_host() : std::string();
  if (!head_host.empty() && host == head_host) return 0;  // the head's proxy listens there
  for (const auto& [other, proxy] : proxies_) {
    if (other != node_id && proxy.host == host && proxy.port == wanted) return 0;
  }
  return wanted;
}

// --- Actions ----------------------------------------------------------------------------------

void ProxyManager::StartLocked(const std::string& node_id, Proxy& proxy, bool replace,
                               Actions& actions) {
  proxy.status = ProxyStatus::kStarting;
  proxy.address.clear();
  proxy.starting = true;
  proxy.calling = false;  // the answer of a call of the previous generation is ignored
  proxy.actor_draining = false;
  proxy.failures = 0;
  proxy.generation = next_generation_++;
  const ProxyLaunch launch{.node_id = node_id,
                           .node_host = proxy.host,
                           .http_host = start_.http_host(),
                           .http_port = proxy.port,
                           .request_timeout_s = start_.request_timeout_s(),
                           .keep_alive_timeout_s = start_.keep_alive_timeout_s(),
                           .replace = replace};
  ProxyRuntime* runtime = options_.runtime;
  std::shared_ptr<Anchor> anchor = anchor_;
  const uint64_t generation = proxy.generation;
  actions.push_back([runtime, anchor, launch, generation] {
    runtime->StartProxy(launch, [anchor, node_id = launch.node_id,
                                 generation](absl::StatusOr<std::string> address) {
      anchor->Run([&](ProxyManager& manager) { manager.OnStarted(node_id, generation, address); });
    });
  });
}

void ProxyManager::CallLocked(const std::string& node_id, Proxy& proxy, const std::string& method,
                              Actions& actions) {
  proxy.calling = true;
  ProxyRuntime* runtime = options_.runtime;
  std::shared_ptr<Anchor> anchor = anchor_;
  const uint64_t generation = proxy.generation;
  const absl::Duration timeout = options_.health_check_timeout;
  actions.push_back([runtime, anchor, node_id, generation, method, timeout] {
    runtime->CallProxy(node_id, method, timeout,
                       [anchor, node_id, generation, method](absl::StatusOr<std::string> result) {
                         anchor->Run([&](ProxyManager& manager) {
                           manager.OnCalled(node_id, generation, method, result);
                         });
                       });
  });
}

void ProxyManager::FindLocked(const std::string& node_id, Actions& actions) {
  ProxyRuntime* runtime = options_.runtime;
  std::shared_ptr<Anchor> anchor = anchor_;
  actions.push_back([runtime, anchor, node_id] {
    runtime->FindProxy(node_id, [anchor, node_id](absl::StatusOr<std::string> address) {
      anchor->Run([&](ProxyManager& manager) { manager.OnFound(node_id, address); });
    });
  });
}

void ProxyManager::KillLocked(const std::string& node_id, Actions& actions) {
  ProxyRuntime* runtime = options_.runtime;
  actions.push_back([runtime, node_id] { runtime->KillProxy(node_id); });
}

// --- The runtime's answers --------------------------------------------------------------------

void ProxyManager::OnStarted(const std::string& node_id, uint64_t generation,
                             const absl::StatusOr<std::string>& address) {
  bool orphan = false;
  {
    absl::MutexLock lock(&mu_);
    auto it = proxies_.find(node_id);
    if (it == proxies_.end() || it->second.generation != generation) {
      // Given up while it started (its node needs none, Serve stopped): the actor it found or
      // made is ended, unless a newer start for the node is under way (which adopts it).
      orphan = address.ok() && it == proxies_.end();
    } else {
      Proxy& proxy = it->second;
      const absl::Time now = options_.clock->Now();
      proxy.starting = false;
      if (address.ok()) {
        proxy.status = ProxyStatus::kHealthy;
        proxy.address = *address;
        proxy.message.clear();
        proxy.next_check = now + options_.health_check_period;
      } else {
        proxy.status = ProxyStatus::kUnhealthy;
        proxy.message = absl::StrCat("cannot start: ", address.status().message());
        proxy.restart_at = now + options_.restart_backoff;
        LogLine(absl::StrCat("serve controller: the proxy of node ", node_id, " ", proxy.message));
      }
    }
  }
  if (orphan) options_.runtime->KillProxy(node_id);
}

void ProxyManager::OnCalled(const std::string& node_id, uint64_t generation,
                            const std::string& method, const absl::StatusOr<std::string>& result) {
  bool drained = false;
  {
    absl::MutexLock lock(&mu_);
    auto it = proxies_.find(node_id);
    if (it == proxies_.end() || it->second.generation != generation) return;
    Proxy& proxy = it->second;
    const absl::Time now = options_.clock->Now();
    proxy.calling = false;
    if (method == kIsDrained) {
      // A drained proxy, or one whose actor is gone: done.
      drained = (result.ok() && *result == "True") || absl::IsUnavailable(result.status());
      proxy.next_check = now + options_.health_check_period;
      if (drained) proxies_.erase(it);
    } else if (method == kCheckHealth || !result.ok()) {
      OnHealthCheckedLocked(proxy, result.status(), now);
    } else {
      // A drain begun or ended: the checks keep their schedule (a drain's first check waits
      // for min_draining_period).
      proxy.actor_draining = method == kStartDraining;
    }
  }
  if (drained) options_.runtime->KillProxy(node_id);
}

void ProxyManager::OnHealthCheckedLocked(Proxy& proxy, const absl::Status& status, absl::Time now) {
  proxy.next_check = now + options_.health_check_period;
  if (status.ok()) {
    proxy.failures = 0;
    return;
  }
  const bool died = absl::IsUnavailable(status);
  ++proxy.failures;
  if (!died && proxy.failures < options_.unhealthy_threshold) return;
  proxy.status = ProxyStatus::kUnhealthy;
  proxy.message =
      died ? absl::StrCat("its actor died: ", status.message())
           : absl::StrCat(proxy.failures,
                          " health checks failed in a row, the last: ", status.message());
  proxy.restart_at = now;  // made again at the next Update, as Ray replaces an unhealthy proxy
  LogLine(absl::StrCat("serve controller: a proxy is unhealthy: ", proxy.message));
}

void ProxyManager::OnFound(const std::string& node_id, const absl::StatusOr<std::string>& address) {
  if (!address.ok()) {
    if (!absl::IsNotFound(address.status())) {
      LogLine(absl::StrCat("serve controller: could not look up the proxy of node ", node_id, ": ",
                           address.status().message()));
    }
    return;
  }
  absl::MutexLock lock(&mu_);
  // A start for the node came first (it adopts the actor itself), or the node is gone.
  if (proxies_.contains(node_id) || !alive_.contains(node_id)) return;
  Proxy& proxy = proxies_[node_id];
  proxy.host = alive_[node_id];
  proxy.status = ProxyStatus::kHealthy;
  proxy.address = *address;
  proxy.port = PortOf(*address);
  proxy.generation = next_generation_++;
  // Its drain (its node has no replica: it is not wanted) begins at the next Update.
  proxy.next_check = options_.clock->Now() + options_.health_check_period;
}

// --- Status -----------------------------------------------------------------------------------

std::vector<v1::ServeProxyStatus> ProxyManager::Statuses() const {
  std::vector<v1::ServeProxyStatus> out;
  absl::MutexLock lock(&mu_);
  out.reserve(proxies_.size());
  for (const auto& [node_id, proxy] : proxies_) {
    v1::ServeProxyStatus& status = out.emplace_back();
    status.set_node_id(node_id);
    status.set_status(std::string(Name(proxy.status)));
    status.set_address(proxy.address);
    status.set_message(proxy.message);
  }
  return out;
}

}  // namespace tessera::serve
