// MessageJson: a protocol message as the JSON people and programs read — from the CLI's --json
// output and from the head's HTTP API alike, so both say the same thing the same way:
// - the .proto field names, with every primitive field present;
// - states and placement strategies as the words people see ("ALIVE", "CREATED", "pending",
//   "RUNNING", "STRICT_PACK"; state_names.h), not the enum value names ("NODE_STATE_ALIVE");
// - amounts in their units: a Resources message is {name: amount} ({"CPU": 8, "memory":
//   17179869184, "GPU": 0.5}: counts as numbers, byte resources in bytes), a ResourceUsage is
//   {"resource", "used", "total"}, a DeviceGrant's per-instance amounts are device fractions
//   ("amounts": [1, 0.5]); a negative amount (never valid) stays raw, as "<name>_raw";
// - 64-bit integers as JSON numbers (the proto JSON mapping writes them as strings).
// Thread-safe: a pure function. Cost: one proto JSON print and a walk of the message.
#pragma once

#include <google/protobuf/message.h>

#include <nlohmann/json.hpp>

namespace tessera::rpc {

nlohmann::ordered_json MessageJson(const google::protobuf::Message& message);

}  // namespace tessera::rpc
