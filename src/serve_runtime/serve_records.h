// How the serve controller keeps its state in the head's StateStore (table "serve"), so that a
// controller started again by a restarted head carries on where the previous one stopped:
//
//   "start"                            Serve's start options (present while Serve is started),
//                                      and whether a shutdown is under way
//   "application/<name>"               an application's spec (the ServeApplicationSpec the client
//                                      deployed), its last_deployed_time_s, whether it is being
//                                      deleted
//   "deployment/<n>:<app>/<name>"      a deployment's DeploymentRecords (deployment_state.h) and
//                                      its replica-id seed; <n> is the length of <app>, so no two
//                                      (app, deployment) pairs share a key whatever the names hold
//
// Encoding: each record is a JSON object with a "format" number. JSON because the deployment's
// records are the controller's own state, not part of the protocol (serve.proto is the wire
// contract; a message for them there would freeze an internal shape into it), because an
// operator can read a record in Redis as it is, and because a reader ignores keys it does not
// know, so a later field is added with its default. The protocol messages a record holds (the
// application spec, the start options) are embedded as base64 of their protobuf bytes: exact,
// with no second mapping of every field to keep in step with the proto.
//
// A record that cannot be read is skipped with one line (DataLoss: "state store table serve, key
// <key>: <what is wrong>"); nothing here aborts.
//
// Threading: pure functions. Cost: linear in the record's size.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "serve/deployment_state.h"
#include "tessera/v1/serve.pb.h"

namespace tessera::serve {

inline constexpr std::string_view kServeTable = "serve";
inline constexpr std::string_view kStartKey = "start";
inline constexpr std::string_view kApplicationKeyPrefix = "application/";
inline constexpr std::string_view kDeploymentKeyPrefix = "deployment/";

struct StoredStart {
  v1::ServeStartOptions options;
  bool shutting_down = false;
};

struct StoredApplication {
  v1::ServeApplicationSpec spec;
  double last_deployed_time_s = 0;
  bool deleting = false;
};

struct StoredDeployment {
  std::string application;
  std::string deployment;
  uint64_t replica_id_seed = 0;
  DeploymentRecords records;
};

std::string ApplicationKey(std::string_view application);
std::string DeploymentKey(std::string_view application, std::string_view deployment);

std::string EncodeStart(const StoredStart& start);
std::string EncodeApplication(const StoredApplication& application);
std::string EncodeDeployment(const StoredDeployment& deployment);

// DataLoss, one line naming the key and what is wrong, when the value is not such a record (or
// is stored under another key than its names give).
absl::StatusOr<StoredStart> DecodeStart(std::string_view key, std::string_view value);
absl::StatusOr<StoredApplication> DecodeApplication(std::string_view key, std::string_view value);
absl::StatusOr<StoredDeployment> DecodeDeployment(std::string_view key, std::string_view value);

// Everything the table holds, as read back; each record that could not be read (or whose key is
// none of the above) is left out and its error kept.
struct ServeRecords {
  std::optional<StoredStart> start;
  std::vector<StoredApplication> applications;  // in key order
  std::vector<StoredDeployment> deployments;    // in key order
  std::vector<absl::Status> errors;
};

ServeRecords DecodeServeRecords(const std::vector<std::pair<std::string, std::string>>& entries);

}  // namespace tessera::serve
