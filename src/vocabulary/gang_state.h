// The states of a gang and of one of its ranks as the C++ API shows them (tessera/gang.h's
// GangStatus::state and GangRank::state). Each is numbered as the protocol's enum of the same
// states (GangJobState, RankState in proto/tessera/v1/jobs.proto), which rpc/state_names.cc checks
// at compile time: their words are the protocol's (rpc::GangStateName, rpc::GangRankStateName,
// the one mapping of states to words), and wire/ converts them by number.
//
// Thread-safe: values.
#pragma once

namespace tessera {

enum class GangState {
  kPending = 1,     // waiting for its first reservation
  kStarting = 2,    // reserved; its ranks are being started
  kRunning = 3,     // every rank started
  kRestarting = 4,  // a rank failed (or the gang resizes): reserving again
  kSucceeded = 5,   // every rank exited with code 0
  kFailed = 6,
  kStopped = 7,  // stopped from outside (Gang::Stop, `tessera job stop`, the head shutting down)
};

enum class GangRankState {
  kStarting = 1,  // its lease and process are being started
  kRunning = 2,
  kSucceeded = 3,  // exited with code 0
  kFailed = 4,     // exited otherwise, was killed, hung, lost its node or never started
  kStopped = 5,    // stopped by the gang (another rank failed, or the gang was stopped)
};

}  // namespace tessera
