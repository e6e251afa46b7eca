// StoreWriter: how the head's tables write to the StateStore without ever dropping an error. A
// write or delete that fails is a line on stderr and an event (the head goes on serving from
// memory, but what it says it holds may not survive a restart); callers carry on.
//
// Thread-safety: stateless over a thread-safe StateStore and EventLog. Cost: one store call.
#pragma once

#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "head/event_log.h"
#include "head/state_store.h"

namespace tessera {

class StoreWriter {
 public:
  // Both must outlive the writer.
  StoreWriter(StateStore* store, EventLog* events) : store_(store), events_(events) {}

  void Put(std::string_view table, std::string_view key, std::string_view value) const;
  void Delete(std::string_view table, std::string_view key) const;
  // Reports a failed store call made elsewhere (e.g. a read-modify-write) the same way.
  void Failed(std::string_view what, std::string_view table, std::string_view key,
              const absl::Status& status) const;

  StateStore* store() const { return store_; }

 private:
  StateStore* store_;
  EventLog* events_;
};

}  // namespace tessera
