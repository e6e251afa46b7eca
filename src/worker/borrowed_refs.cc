#include "worker/borrowed_refs.h"

#include <algorithm>
#include <deque>
#include <map>
#include <thread>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/random/random.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "rpc/auth.h"
#include "worker/owner_fetch.h"

namespace tessera::worker {
namespace {

// How long a batch waits for an owner's answer before that owner is taken for gone: additions
// hold up a worker's replies until answered (FlushBorrows); removals only the next batch.
constexpr absl::Duration kAdditionsDeadline = absl::Seconds(10);
constexpr absl::Duration kRemovalsDeadline = absl::Seconds(2);
// Tries of one batch at an owner that answers, but too slowly.
constexpr int kAttemptsWhileSlow = 6;

struct Change {
  std::string owner;  // the owner's address
  ObjectId id;
  std::string borrower;
  int64_t delta = 0;
};

class BorrowedReference;

class Borrows {
 public:
  Borrows() {
    absl::BitGen bits;
    absl::MutexLock lock(&mu_);
    borrower_id_ = absl::StrFormat("borrower-%016x%016x", absl::Uniform<uint64_t>(bits),
                                   absl::Uniform<uint64_t>(bits));
  }

  std::string borrower_id() {
    absl::MutexLock lock(&mu_);
    return borrower_id_;
  }
  void SetBorrowerId(const std::string& id) {
    absl::MutexLock lock(&mu_);
    borrower_id_ = id;
  }

  void SetLocalOwner(const std::string& address, LocalBorrowChange change) {
    absl::MutexLock lock(&mu_);
    local_address_ = address;
    local_change_ = address.empty() ? nullptr : std::move(change);
  }

  void SetToken(const std::string& token) {
    absl::MutexLock lock(&mu_);
    token_ = token;
  }

  std::shared_ptr<internal::LocalReference> Borrow(const ObjectRefData& ref);
  // Called by the last copy of a BorrowedReference.
  void Unborrow(const ObjectRefData& ref, const std::string& borrower,
                const BorrowedReference* gone);

  // Applies a change to this process's own object at once, or queues it for its owner.
  void Apply(Change change) {
    if (change.owner.empty() || change.borrower.empty()) return;  // no owner to count at
    LocalBorrowChange local;
    {
      absl::MutexLock lock(&mu_);
      if (change.owner == local_address_ && local_change_) {
        local = local_change_;
      } else {
        if (change.delta > 0) ++queued_additions_;
        queue_.push_back(std::move(change));
        if (!sender_started_) {
          sender_started_ = true;
          std::thread([this] { SendForever(); }).detach();
        }
        return;
      }
    }
    local(change.id, change.borrower, change.delta);
  }

  // Waits for the additions only: removals never need to land before anything else.
  void Flush() {
    absl::MutexLock lock(&mu_);
    const uint64_t target = queued_additions_;
    auto sent = [this, target] {
      mu_.AssertHeld();
      return answered_additions_ >= target;
    };
    mu_.Await(absl::Condition(&sent));
  }

 private:
  void SendForever() {
    while (true) {
      std::deque<Change> batch;
      std::string token;
      {
        absl::MutexLock lock(&mu_);
        auto has_work = [this] {
          mu_.AssertHeld();
          return !queue_.empty();
        };
        mu_.Await(absl::Condition(&has_work));
        batch.swap(queue_);
        token = token_;
      }
      // Additions first, all answered, then removals: a reference handed on is counted at its
      // owner before any reference it came through is let go.
      SendPhase(batch, token, /*additions=*/true);
      const uint64_t additions = std::count_if(
          batch.begin(), batch.end(), [](const Change& change) { return change.delta > 0; });
      {
        absl::MutexLock lock(&mu_);
        answered_additions_ += additions;
      }
      SendPhase(batch, token, /*additions=*/false);
    }
  }

  static void SendPhase(const std::deque<Change>& batch, const std::string& token, bool additions) {
    std::map<std::string, v1::UpdateBorrowsRequest> by_owner;
    for (const Change& change : batch) {
      if ((change.delta > 0) != additions) continue;
      v1::BorrowChange* out = by_owner[change.owner].add_changes();
      out->set_object_id(change.id.Binary());
      out->set_borrower(change.borrower);
      out->set_delta(change.delta);
    }
    for (const auto& [owner, request] : by_owner) {
      // An owner that cannot be reached has exited: its objects are lost, nothing to count. A
      // slow one is asked again: an addition it missed would let a later removal of the same
      // borrower's count free the object under another reference.
      for (int attempt = 0;; ++attempt) {
        grpc::ClientContext context;
        rpc::ConfigureClientContext(&context, additions ? kAdditionsDeadline : kRemovalsDeadline);
        v1::UpdateBorrowsReply reply;
        const grpc::Status status =
            OwnerStubFor(owner, token).UpdateBorrows(&context, request, &reply);
        if (status.error_code() != grpc::StatusCode::DEADLINE_EXCEEDED ||
            attempt + 1 >= kAttemptsWhileSlow) {
          break;
        }
      }
    }
  }

  absl::Mutex mu_;
  std::string borrower_id_ ABSL_GUARDED_BY(mu_);
  std::string token_ ABSL_GUARDED_BY(mu_);
  std::string local_address_ ABSL_GUARDED_BY(mu_);
  LocalBorrowChange local_change_ ABSL_GUARDED_BY(mu_);
  std::deque<Change> queue_ ABSL_GUARDED_BY(mu_);
  uint64_t queued_additions_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t answered_additions_ ABSL_GUARDED_BY(mu_) = 0;
  bool sender_started_ ABSL_GUARDED_BY(mu_) = false;

  struct Held {
    std::weak_ptr<BorrowedReference> reference;
    const BorrowedReference* raw = nullptr;
  };
  absl::Mutex held_mu_;  // taken before mu_ (a change is queued while held)
  absl::flat_hash_map<ObjectId, Held> held_ ABSL_GUARDED_BY(held_mu_);
};

// Never destroyed: references may be let go by threads still running at exit.
Borrows& TheBorrows() {
  static Borrows* borrows = new Borrows();
  return *borrows;
}

// This process's count of one object of another process, under the borrower id it was made
// with.
class BorrowedReference final : public internal::LocalReference {
 public:
  BorrowedReference(ObjectRefData ref, std::string borrower)
      : ref_(std::move(ref)), borrower_(std::move(borrower)) {}
  ~BorrowedReference() override { TheBorrows().Unborrow(ref_, borrower_, this); }

 private:
  ObjectRefData ref_;
  std::string borrower_;
};

// A count Lend made for `borrower`, undone when this goes.
class LentReference final : public internal::LocalReference {
 public:
  LentReference(ObjectRefData ref, std::string borrower)
      : ref_(std::move(ref)), borrower_(std::move(borrower)) {}
  ~LentReference() override {
    TheBorrows().Apply(Change{ref_.owner.address, ref_.id, borrower_, -1});
  }

 private:
  ObjectRefData ref_;
  std::string borrower_;
};

std::shared_ptr<internal::LocalReference> Borrows::Borrow(const ObjectRefData& ref) {
  {
    absl::MutexLock lock(&held_mu_);
    Held& held = held_[ref.id];
    if (auto live = held.reference.lock(); live != nullptr) return live;
    const std::string borrower = borrower_id();
    auto made = std::make_shared<BorrowedReference>(ref, borrower);
    held.reference = made;
    held.raw = made.get();
    // Queued under held_mu_: the addition goes out before this copy's removal can.
    Apply(Change{ref.owner.address, ref.id, borrower, +1});
    return made;
  }
}

void Borrows::Unborrow(const ObjectRefData& ref, const std::string& borrower,
                       const BorrowedReference* gone) {
  absl::MutexLock lock(&held_mu_);
  auto it = held_.find(ref.id);
  if (it != held_.end() && it->second.raw == gone) held_.erase(it);
  Apply(Change{ref.owner.address, ref.id, borrower, -1});
}

}  // namespace

void SetLocalOwner(const std::string& address, LocalBorrowChange change) {
  TheBorrows().SetLocalOwner(address, std::move(change));
}

void SetBorrowToken(const std::string& token) { TheBorrows().SetToken(token); }

void SetBorrowerId(const std::string& id) { TheBorrows().SetBorrowerId(id); }

std::shared_ptr<internal::LocalReference> Borrow(const ObjectRefData& ref) {
  return TheBorrows().Borrow(ref);
}

void Lend(const std::vector<ObjectRefData>& refs, const std::string& borrower) {
  for (const ObjectRefData& ref : refs) {
    TheBorrows().Apply(Change{ref.owner.address, ref.id, borrower, +1});
  }
}

void Unlend(const std::vector<ObjectRefData>& refs, const std::string& borrower) {
  for (const ObjectRefData& ref : refs) {
    TheBorrows().Apply(Change{ref.owner.address, ref.id, borrower, -1});
  }
}

std::shared_ptr<internal::LocalReference> LentReference(const ObjectRefData& ref,
                                                        const std::string& borrower) {
  return std::make_shared<class LentReference>(ref, borrower);
}

void FlushBorrows() { TheBorrows().Flush(); }

}  // namespace tessera::worker
