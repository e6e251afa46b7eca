#include "cli/cluster_format.h"

#include <map>

#include <google/protobuf/util/json_util.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/string_util.h"
#include "resources/byte_size.h"
#include "resources/quantity.h"
#include "resources/resource_set.h"
#include "rpc/state_names.h"

namespace tessera::cli {

std::string AmountText(std::string_view resource, int64_t raw) {
  if (raw < 0) return absl::StrCat(raw, " (raw)");
  const Quantity q = Quantity::FromRaw(raw);
  if (IsByteResource(resource) && q.IsInteger()) {
    return FormatBytes(static_cast<uint64_t>(q.WholePart()));
  }
  return FormatResourceAmount(resource, q);
}

std::string ResourcesText(const tessera::v1::Resources& resources) {
  const std::map<std::string, int64_t> sorted(resources.raw().begin(), resources.raw().end());
  std::vector<std::string> parts;
  for (const auto& [name, raw] : sorted) {
    if (raw == 0) continue;
    parts.push_back(
        absl::StrCat(name, "=", raw < 0 ? absl::StrCat(raw, " (raw)")
                                        : FormatResourceAmount(name, Quantity::FromRaw(raw))));
  }
  return absl::StrJoin(parts, ",");
}

std::string UsageText(const tessera::v1::Resources& available,
                      const tessera::v1::Resources& total) {
  const std::map<std::string, int64_t> sorted(total.raw().begin(), total.raw().end());
  std::vector<std::string> parts;
  for (const auto& [name, total_raw] : sorted) {
    if (total_raw == 0) continue;
    const auto it = available.raw().find(name);
    const int64_t free_raw = it == available.raw().end() ? 0 : it->second;
    parts.push_back(absl::StrCat(name, " ", AmountText(name, total_raw - free_raw), "/",
                                 AmountText(name, total_raw)));
  }
  return absl::StrJoin(parts, ", ");
}

std::string DevicesText(const tessera::v1::Allocation& allocation) {
  std::vector<std::string> parts;
  for (const tessera::v1::DeviceGrant& grant : allocation.devices()) {
    std::vector<std::string> ids;
    for (int i = 0; i < grant.instances_size(); ++i) {
      const int64_t raw = i < grant.amounts_raw_size() ? grant.amounts_raw(i) : Quantity::kScale;
      ids.push_back(raw == Quantity::kScale
                        ? absl::StrCat(grant.instances(i))
                        : absl::StrCat(grant.instances(i), " (",
                                       Quantity::FromRaw(raw).ToString(), ")"));
    }
    parts.push_back(absl::StrCat(grant.resource(), " ", absl::StrJoin(ids, ",")));
  }
  return absl::StrJoin(parts, "; ");
}

std::string LabelsText(const google::protobuf::Map<std::string, std::string>& labels) {
  const std::map<std::string, std::string> sorted(labels.begin(), labels.end());
  return absl::StrJoin(sorted, ",", absl::PairFormatter("="));
}

namespace {

void WriteStateWords(const google::protobuf::Message& message, nlohmann::ordered_json& json);

// One value of an enum or message `field` (index -1: its singular value) in its JSON `json`.
void WriteStateWordsOfValue(const google::protobuf::Message& message,
                            const google::protobuf::FieldDescriptor* field, int index,
                            nlohmann::ordered_json& json) {
  const google::protobuf::Reflection* reflection = message.GetReflection();
  if (field->cpp_type() == google::protobuf::FieldDescriptor::CPPTYPE_ENUM) {
    const google::protobuf::EnumValueDescriptor* value =
        index < 0 ? reflection->GetEnum(message, field)
                  : reflection->GetRepeatedEnum(message, field, index);
    if (const auto word = rpc::StateWordOf(*value)) json = std::string(*word);
    return;
  }
  WriteStateWords(index < 0 ? reflection->GetMessage(message, field)
                            : reflection->GetRepeatedMessage(message, field, index),
                  json);
}

// The proto JSON mapping writes an enum as its value name ("NODE_STATE_ALIVE"); scripts and the
// docs read the head's states as the words people see ("ALIVE"). Walks `message` beside its JSON
// and puts the word in place of every value of an enum rpc::StateWordOf knows. Maps hold no such
// enum in our protos and are left as they are, as are the well-known types (their own JSON).
void WriteStateWords(const google::protobuf::Message& message, nlohmann::ordered_json& json) {
  using google::protobuf::FieldDescriptor;
  if (!json.is_object()) return;
  const google::protobuf::Descriptor* type = message.GetDescriptor();
  for (int i = 0; i < type->field_count(); ++i) {
    const FieldDescriptor* field = type->field(i);
    const bool is_enum = field->cpp_type() == FieldDescriptor::CPPTYPE_ENUM;
    const bool is_message = field->cpp_type() == FieldDescriptor::CPPTYPE_MESSAGE;
    if ((!is_enum && !is_message) || field->is_map()) continue;
    if (is_message && field->message_type()->file()->package() == "google.protobuf") continue;
    const auto it = json.find(field->name());
    if (it == json.end()) continue;
    if (!field->is_repeated()) {
      WriteStateWordsOfValue(message, field, -1, *it);
      continue;
    }
    const int size = message.GetReflection()->FieldSize(message, field);
    if (!it->is_array() || static_cast<int>(it->size()) != size) continue;
    for (int k = 0; k < size; ++k) WriteStateWordsOfValue(message, field, k, (*it)[k]);
  }
}

}  // namespace

nlohmann::ordered_json MessageJson(const google::protobuf::Message& message) {
  google::protobuf::util::JsonPrintOptions options;
  options.preserve_proto_field_names = true;
  options.always_print_primitive_fields = true;
  std::string text;
  if (!google::protobuf::util::MessageToJsonString(message, &text, options).ok()) {
    return nlohmann::ordered_json::object();
  }
  nlohmann::ordered_json json =
      nlohmann::ordered_json::parse(text, nullptr, /*allow_exceptions=*/false);
  WriteStateWords(message, json);
  return json;
}

std::vector<std::string> SplitSemicolons(std::string_view text) {
  std::vector<std::string> pieces;
  if (Trim(text).empty()) return pieces;
  size_t start = 0;
  while (true) {
    const size_t end = text.find(';', start);
    pieces.emplace_back(Trim(text.substr(start, end == std::string_view::npos ? text.npos
                                                                              : end - start)));
    if (end == std::string_view::npos) break;
    start = end + 1;
  }
  return pieces;
}

}  // namespace tessera::cli
