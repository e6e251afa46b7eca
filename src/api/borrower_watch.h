// BorrowerWatch: an owner forgets the borrowers that are gone (docs/objects.md, borrowing).
//
// Every `period`, each process counted as a borrower of the owner's objects is probed: a
// borrower id is the address of a gRPC server in that process (worker::SetBorrowerId), and a
// channel to it must connect. One that cannot be reached in two rounds in a row has exited: its
// counts are dropped (ObjectTable::DropBorrower), freeing what only it held. Ids that are not
// addresses (a process that borrowed before it served) are not probed.
//
// Threading: its own thread, from construction to Stop (or destruction).
#pragma once

#include <map>
#include <memory>
#include <string>
#include <thread>

#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "api/object_table.h"
#include "grpcpp/channel.h"

namespace tessera::api {

class BorrowerWatch {
 public:
  BorrowerWatch(std::shared_ptr<ObjectTable> table, std::string token, std::string self,
                absl::Duration period);
  ~BorrowerWatch() { Stop(); }
  BorrowerWatch(const BorrowerWatch&) = delete;
  BorrowerWatch& operator=(const BorrowerWatch&) = delete;

  void Stop();

 private:
  void CheckOnce();

  const std::shared_ptr<ObjectTable> table_;
  const std::string token_;
  const std::string self_;  // this owner's own address, counted as a borrower of what it holds
  const absl::Duration period_;
  // Only the watch's thread touches these.
  std::map<std::string, std::shared_ptr<grpc::Channel>> channels_;
  std::map<std::string, int> misses_;
  absl::Notification stop_;
  std::thread thread_;
};

}  // namespace tessera::api
