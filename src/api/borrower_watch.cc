#include "api/borrower_watch.h"

#include <set>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "rpc/channel.h"

namespace tessera::api {
namespace {

// How long one probe waits for a borrower's server to accept the connection.
constexpr absl::Duration kProbeDeadline = absl::Seconds(2);
// Rounds in a row a borrower must be unreachable before it is taken for gone.
constexpr int kMissesForGone = 2;

bool IsAddress(const std::string& id) {
  return absl::StrContains(id, ':') && !absl::StartsWith(id, "borrower-");
}

}  // namespace

BorrowerWatch::BorrowerWatch(std::shared_ptr<ObjectTable> table, std::string token,
                             std::string self, absl::Duration period)
    : table_(std::move(table)), token_(std::move(token)), self_(std::move(self)), period_(period) {
  thread_ = std::thread([this] {
    while (!stop_.WaitForNotificationWithTimeout(period_)) CheckOnce();
  });
}

void BorrowerWatch::Stop() {
  if (!thread_.joinable()) return;
  stop_.Notify();
  thread_.join();
}

void BorrowerWatch::CheckOnce() {
  std::set<std::string> borrowers;
  for (std::string& id : table_->AllBorrowers()) {
    if (id != self_ && IsAddress(id)) borrowers.insert(std::move(id));
  }
  // Forget the borrowers no longer counted.
  for (auto it = channels_.begin(); it != channels_.end();) {
    if (borrowers.contains(it->first)) {
      ++it;
    } else {
      misses_.erase(it->first);
      it = channels_.erase(it);
    }
  }
  for (const std::string& borrower : borrowers) {
    if (stop_.HasBeenNotified()) return;
    std::shared_ptr<grpc::Channel>& channel = channels_[borrower];
    if (channel == nullptr) channel = rpc::MakeChannel(borrower, token_);
    if (channel->WaitForConnected(absl::ToChronoTime(absl::Now() + kProbeDeadline))) {
      misses_.erase(borrower);
      continue;
    }
    if (++misses_[borrower] < kMissesForGone) continue;
    table_->DropBorrower(borrower);
    misses_.erase(borrower);
    channels_.erase(borrower);
  }
}

}  // namespace tessera::api
