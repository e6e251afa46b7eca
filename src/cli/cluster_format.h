// How the cluster commands show protocol messages as text and JSON for people and programs
// (conversions of core types into messages are rpc/proto_convert.h). Thread-safe: pure functions.
#pragma once

#include <google/protobuf/message.h>

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "rpc/message_json.h"
#include "tessera/v1/common.pb.h"
#include "tessera/v1/head.pb.h"

namespace tessera::cli {

// "CPU=8,GPU=4,memory=64GiB", exact (the --resources form); negative entries are written raw.
std::string ResourcesText(const tessera::v1::Resources& resources);
// "used/total" per resource of `total`: "CPU 2/48, GPU 1/8".
std::string UsageText(const tessera::v1::Resources& available, const tessera::v1::Resources& total);
// One amount of one resource as people read it ("2.5", "64 GiB"; rounded for bytes).
std::string AmountText(std::string_view resource, int64_t raw);
// "  in use 3.25" (CPU cores), "  in use 1.5 GiB" (memory), "  busy 87% of 16 measured" (a device
// resource: the mean busy fraction of the devices measured); "" when nothing was measured.
std::string MeasuredUseText(const tessera::v1::ResourceUsage& usage);
// "GPU 0,1; TPU 2 (0.5)": the device instances of an allocation; "" when it holds none.
std::string DevicesText(const tessera::v1::Allocation& allocation);
// "k=v,k2=v2", sorted by key.
std::string LabelsText(const google::protobuf::Map<std::string, std::string>& labels);

// A protocol message as JSON for people and programs: rpc/message_json.h.
using rpc::MessageJson;

// Splits "a;b;c" on ';' and trims each piece; empty text is no pieces.
std::vector<std::string> SplitSemicolons(std::string_view text);

}  // namespace tessera::cli
