// MessageJson (message_json.h): the proto JSON mapping, then one walk of the message beside its
// JSON that rewrites what the mapping writes for machines (enum names, raw fixed-point amounts,
// int64 strings) into what people read.
#include "rpc/message_json.h"

#include <google/protobuf/descriptor.h>
#include <google/protobuf/util/json_util.h>

#include <map>
#include <string>

#include "resources/quantity.h"
#include "rpc/state_names.h"
#include "tessera/v1/common.pb.h"
#include "tessera/v1/head.pb.h"

namespace tessera::rpc {
namespace {

using google::protobuf::FieldDescriptor;
using google::protobuf::Message;
using google::protobuf::Reflection;
using Json = nlohmann::ordered_json;

// A raw fixed-point amount (1e-4 units) as a JSON number in its unit: an integer when whole.
Json Amount(int64_t raw) {
  const Quantity q = Quantity::FromRaw(raw);
  if (q.IsInteger()) return q.WholePart();
  return static_cast<double>(raw) / static_cast<double>(Quantity::kScale);
}

Json ResourcesJson(const v1::Resources& resources) {
  const std::map<std::string, int64_t> sorted(resources.raw().begin(), resources.raw().end());
  Json out = Json::object();
  for (const auto& [name, raw] : sorted) {
    if (raw < 0) {
      out[name + "_raw"] = raw;
    } else {
      out[name] = Amount(raw);
    }
  }
  return out;
}

void Rewrite(const Message& message, Json& json);

// One value of `field` (index -1: its singular value) in its JSON `json`.
void RewriteValue(const Message& message, const FieldDescriptor* field, int index, Json& json) {
  const Reflection* reflection = message.GetReflection();
  switch (field->cpp_type()) {
    case FieldDescriptor::CPPTYPE_ENUM: {
      const google::protobuf::EnumValueDescriptor* value =
          index < 0 ? reflection->GetEnum(message, field)
                    : reflection->GetRepeatedEnum(message, field, index);
      if (const auto word = StateWordOf(*value)) json = std::string(*word);
      return;
    }
    case FieldDescriptor::CPPTYPE_INT64:
      json = index < 0 ? reflection->GetInt64(message, field)
                       : reflection->GetRepeatedInt64(message, field, index);
      return;
    case FieldDescriptor::CPPTYPE_UINT64:
      json = index < 0 ? reflection->GetUInt64(message, field)
                       : reflection->GetRepeatedUInt64(message, field, index);
      return;
    case FieldDescriptor::CPPTYPE_MESSAGE:
      Rewrite(index < 0 ? reflection->GetMessage(message, field)
                        : reflection->GetRepeatedMessage(message, field, index),
              json);
      return;
    default: return;
  }
}

void Rewrite(const Message& message, Json& json) {
  if (!json.is_object()) return;
  if (const auto* resources = dynamic_cast<const v1::Resources*>(&message)) {
    json = ResourcesJson(*resources);
    return;
  }
  if (const auto* usage = dynamic_cast<const v1::ResourceUsage*>(&message)) {
    json = Json{{"resource", usage->resource()},
                {"used", Amount(usage->used_raw())},
                {"total", Amount(usage->total_raw())}};
    return;
  }
  if (const auto* grant = dynamic_cast<const v1::DeviceGrant*>(&message)) {
    Json amounts = Json::array();
    for (int i = 0; i < grant->instances_size(); ++i) {
      amounts.push_back(
          Amount(i < grant->amounts_raw_size() ? grant->amounts_raw(i) : Quantity::kScale));
    }
    json = Json{
        {"resource", grant->resource()},
        {"instances", Json(std::vector<int>(grant->instances().begin(), grant->instances().end()))},
        {"amounts", std::move(amounts)}};
    return;
  }
  const google::protobuf::Descriptor* type = message.GetDescriptor();
  for (int i = 0; i < type->field_count(); ++i) {
    const FieldDescriptor* field = type->field(i);
    const auto cpp = field->cpp_type();
    const bool rewritten =
        cpp == FieldDescriptor::CPPTYPE_ENUM || cpp == FieldDescriptor::CPPTYPE_MESSAGE ||
        cpp == FieldDescriptor::CPPTYPE_INT64 || cpp == FieldDescriptor::CPPTYPE_UINT64;
    // Maps hold no enum, amount or message of ours (their int64 values stay as the mapping
    // writes them); the well-known types have JSON of their own.
    if (!rewritten || field->is_map()) continue;
    if (cpp == FieldDescriptor::CPPTYPE_MESSAGE &&
        field->message_type()->file()->package() == "google.protobuf") {
      continue;
    }
    const auto it = json.find(field->name());
    if (it == json.end()) continue;
    if (!field->is_repeated()) {
      RewriteValue(message, field, -1, *it);
      continue;
    }
    const int size = message.GetReflection()->FieldSize(message, field);
    if (!it->is_array() || static_cast<int>(it->size()) != size) continue;
    for (int k = 0; k < size; ++k) RewriteValue(message, field, k, (*it)[k]);
  }
}

}  // namespace

nlohmann::ordered_json MessageJson(const google::protobuf::Message& message) {
  google::protobuf::util::JsonPrintOptions options;
  options.preserve_proto_field_names = true;
  options.always_print_primitive_fields = true;
  std::string text;
  if (!google::protobuf::util::MessageToJsonString(message, &text, options).ok()) {
    return Json::object();
  }
  Json json = Json::parse(text, nullptr, /*allow_exceptions=*/false);
  Rewrite(message, json);
  return json;
}

}  // namespace tessera::rpc
