#include "hardware/plugins/nvidia/nvidia_error_reader.h"

#include <cstdint>
#include <deque>
#include <optional>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "hardware/plugins/common/kernel_log.h"
#include "hardware/plugins/nvidia/nvidia_xid.h"

namespace tessera {
namespace {

constexpr std::string_view kFamily = "nvidia";
constexpr char kPositionMark[] = "kernel_log";
constexpr char kLostMark[] = "kernel_log_lost";
constexpr size_t kKeptRecords = 256;
constexpr size_t kMaxRecordsPerCall = 1024;

class NvidiaErrorReader final : public DeviceErrorReader {
 public:
  explicit NvidiaErrorReader(std::string path) {
    if (!path.empty()) log_ = std::make_unique<KernelLog>(std::move(path));
  }

  DeviceErrorSnapshot Snapshot(std::span<const Device> /*devices*/, absl::Time now) override {
    Poll();
    DeviceErrorSnapshot snapshot;
    snapshot.taken = now;
    snapshot.marks[kPositionMark] = position_;
    if (log_ != nullptr) snapshot.marks[kLostMark] = log_->lost();
    return snapshot;
  }

  DeviceErrorReport MessagesSince(const DeviceErrorSnapshot& snapshot,
                                  std::span<const Device> devices, absl::Time /*now*/) override {
    Poll();
    DeviceErrorReport report;
    if (log_ == nullptr) return report;
    if (!log_->error().empty()) report.warnings.push_back(log_->error() + "; no Xid messages");
    auto mark = snapshot.marks.find(kPositionMark);
    const uint64_t since = mark == snapshot.marks.end() ? position_ : mark->second;
    auto lost = snapshot.marks.find(kLostMark);
    if (lost != snapshot.marks.end() && log_->lost() > lost->second) {
      report.warnings.push_back(absl::StrCat(
          log_->lost() - lost->second, " kernel log records were lost before they were read (",
          log_->path(), "); an Xid record may be missing"));
    }
    if (dropped_through_ > since) {
      report.warnings.push_back(absl::StrCat("more than ", kKeptRecords,
                                             " Xid records since; only the newest are listed"));
    }
    for (const Kept& kept : kept_) {
      if (kept.position <= since) continue;
      for (const Device& device : devices) {
        if (device.family != kFamily) continue;
        std::optional<PciSlot> slot = ParsePciSlot(device.pci_bus_id);
        if (!slot.has_value() || !(*slot == kept.record.slot)) continue;
        std::string line = absl::StrCat(DeviceLabel("GPU", device), ": Xid ", kept.record.code);
        if (!kept.record.detail.empty()) absl::StrAppend(&line, ", ", kept.record.detail);
        report.messages.push_back(std::move(line));
      }
    }
    return report;
  }

  void Poll() override {
    if (log_ == nullptr) return;
    for (KernelLogRecord& record : log_->ReadNew(kMaxRecordsPerCall)) {
      ++position_;
      std::optional<XidRecord> xid = ParseXidRecord(record.text);
      if (!xid.has_value()) continue;
      kept_.push_back(Kept{position_, *std::move(xid)});
      if (kept_.size() > kKeptRecords) {
        dropped_through_ = kept_.front().position;
        kept_.pop_front();
      }
    }
  }

 private:
  struct Kept {
    uint64_t position = 0;  // 1 for the first record read
    XidRecord record;
  };

  std::unique_ptr<KernelLog> log_;  // null: no kernel log on this host (a fake tree)
  uint64_t position_ = 0;           // records read so far
  std::deque<Kept> kept_;           // the newest Xid records, oldest first
  uint64_t dropped_through_ = 0;    // the position of the newest record dropped from kept_
};

}  // namespace

std::unique_ptr<DeviceErrorReader> MakeNvidiaErrorReader(const DeviceErrorContext& context) {
  return std::make_unique<NvidiaErrorReader>(KernelLogPath(context));
}

}  // namespace tessera
