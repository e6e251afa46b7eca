#include "node/worker_device_errors.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "base/log_line.h"

namespace tessera {
namespace {

// Distinct source warnings logged in all: a source that keeps failing does not fill the log.
constexpr size_t kMaxWarningsLogged = 64;
constexpr char kSeparator[] = "; ";
// What the messages may take, leaving room for "; and N more".
constexpr size_t kItemBytes = kMaxDeviceMessageBytes - 24;

std::string Cut(std::string text, size_t limit) {
  if (text.size() <= limit) return text;
  text.resize(limit > 3 ? limit - 3 : 0);
  return text + "...";
}

}  // namespace

std::string JoinDeviceMessages(const std::vector<std::string>& messages) {
  std::vector<std::pair<std::string, size_t>> distinct;  // first-seen order, with counts
  std::map<std::string, size_t> where;
  for (const std::string& m : messages) {
    auto [it, inserted] = where.try_emplace(m, distinct.size());
    if (inserted) {
      distinct.emplace_back(m, 1);
    } else {
      ++distinct[it->second].second;
    }
  }
  std::string joined;
  size_t taken = 0;
  for (const auto& [text, count] : distinct) {
    std::string item = count > 1 ? absl::StrCat(text, " (", count, " times)") : text;
    if (taken == kMaxDeviceMessages) break;
    const size_t used = joined.size() + (taken > 0 ? 2 : 0);
    if (used >= kItemBytes) break;
    const size_t room = kItemBytes - used;
    if (item.size() > room) {
      if (taken > 0) break;
      item = Cut(std::move(item), room);  // a first message alone is cut rather than lost
    }
    if (taken > 0) joined += kSeparator;
    joined += item;
    ++taken;
  }
  if (taken < distinct.size()) absl::StrAppend(&joined, "; and ", distinct.size() - taken, " more");
  return joined;
}

WorkerDeviceErrors::WorkerDeviceErrors(const NodeHardware& hardware, const Sysroot& sysroot,
                                       const DeviceErrorOptions& options, std::string log_name,
                                       Clock* clock)
    : log_name_(std::move(log_name)), clock_(clock), watch_(hardware, sysroot, options) {
  for (const VisibleFamily& family : hardware.VisibleFamilies()) {
    by_resource_.emplace(std::string(family.plugin->resource_name()),
                         Family{std::string(family.plugin->family()), family.visible});
  }
}

HeldDevices WorkerDeviceErrors::HeldBy(const Allocation& allocation) const {
  HeldDevices held;
  for (const DeviceGrant& grant : allocation.devices) {
    auto family = by_resource_.find(grant.resource);
    if (family == by_resource_.end()) continue;
    for (int instance : grant.instances) {
      if (instance < 0 || static_cast<size_t>(instance) >= family->second.visible.size()) continue;
      held[family->second.name].push_back(family->second.visible[static_cast<size_t>(instance)]);
    }
  }
  return held;
}

void WorkerDeviceErrors::Started(const WorkerId& worker, const Allocation& allocation) {
  if (!watch_.watches_anything()) return;
  HeldDevices held = HeldBy(allocation);
  if (held.empty()) return;
  NodeErrorSnapshot snapshot = watch_.Snapshot(std::move(held), clock_->Now());
  absl::MutexLock lock(&mu_);
  started_[worker] = std::move(snapshot);
}

std::string WorkerDeviceErrors::Exited(const WorkerId& worker, bool failed) {
  NodeErrorSnapshot snapshot;
  {
    absl::MutexLock lock(&mu_);
    auto it = started_.find(worker);
    if (it == started_.end()) return "";
    snapshot = std::move(it->second);
    started_.erase(it);
  }
  if (!failed) return "";
  DeviceErrorReport report = watch_.MessagesSince(snapshot, clock_->Now());
  LogWarnings(report.warnings);
  return JoinDeviceMessages(report.messages);
}

void WorkerDeviceErrors::Poll() {
  if (watch_.watches_anything()) watch_.Poll();
}

void WorkerDeviceErrors::LogWarnings(const std::vector<std::string>& warnings) {
  for (const std::string& warning : warnings) {
    {
      absl::MutexLock lock(&mu_);
      if (warned_.size() >= kMaxWarningsLogged || !warned_.insert(warning).second) continue;
    }
    LogLine(absl::StrCat(log_name_, ": device messages: ", warning));
  }
}

}  // namespace tessera
