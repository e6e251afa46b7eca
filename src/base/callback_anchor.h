// CallbackAnchor<T>: what callbacks handed to another component reach an object through, so
// that a callback that comes after the object is gone finds nothing to call. The callbacks hold
// the anchor (a shared_ptr), not the object; the object attaches itself once built and detaches
// first thing in its destructor, which waits for the callbacks running at that moment.
//
// Threading: thread-safe. Run holds a reader lock while `fn` runs: `fn` must not detach.
// Cost: one uncontended reader lock per callback.
#pragma once

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"

namespace tessera {

template <typename T>
class CallbackAnchor {
 public:
  void Attach(T* target) ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    target_ = target;
  }
  // Waits for the callbacks in Run now; later ones find nothing.
  void Detach() ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    target_ = nullptr;
  }
  // Calls fn(target) while the target is attached; else nothing.
  template <typename Fn>
  void Run(Fn&& fn) ABSL_LOCKS_EXCLUDED(mu_) {
    absl::ReaderMutexLock lock(&mu_);
    if (target_ != nullptr) fn(*target_);
  }

 private:
  absl::Mutex mu_;
  T* target_ ABSL_GUARDED_BY(mu_) = nullptr;
};

}  // namespace tessera
