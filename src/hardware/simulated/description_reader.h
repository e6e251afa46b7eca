// Reading a YAML hardware description with errors that point at the text: every error is one
// line "<source>:<line>:<column>: <field path>: <problem>". Wraps yaml-cpp's node access so no
// exception leaves (callers still catch YAML::Exception at the boundary for safety).
// Not thread-safe; one reader per parse.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "yaml-cpp/yaml.h"

namespace tessera::simulated {

// A value in the document and how to name it in errors: `path` is the field path
// ("accelerators[0].count"), `key` the map key node that introduced it (for its position when
// the value has none, e.g. an empty value).
struct Field {
  Field(std::string path_in, YAML::Node value_in, YAML::Node key_in)
      : path(std::move(path_in)), value(value_in), key(key_in) {}
  Field(const Field&) = default;
  // Assigning a YAML::Node rewrites the document node it refers to (yaml-cpp's reference
  // semantics), so a Field is constructed, never assigned.
  Field& operator=(const Field&) = delete;

  std::string path;
  YAML::Node value;
  YAML::Node key;
};

class DescriptionReader {
 public:
  explicit DescriptionReader(std::string source) : source_(std::move(source)) {}

  const std::string& source() const { return source_; }

  // InvalidArgument "<source>:<line>:<col>: <path>: <problem>" (path omitted when empty).
  absl::Status Error(const Field& field, std::string_view problem) const;
  // The same, positioned at a yaml-cpp mark (parse errors).
  absl::Status ErrorAt(const YAML::Mark& mark, std::string_view problem) const;

  // Checks that `field` is a map whose keys are distinct strings among `allowed`; an unknown key
  // is an error naming the allowed ones (and the closest, for typos).
  absl::Status CheckMap(const Field& field, std::initializer_list<std::string_view> allowed) const;
  // The child `key` of a map checked by CheckMap, or nullopt when absent.
  std::optional<Field> Child(const Field& map, std::string_view key) const;
  absl::StatusOr<Field> Required(const Field& map, std::string_view key) const;
  // The elements of a list.
  absl::StatusOr<std::vector<Field>> List(const Field& field) const;

  absl::StatusOr<std::string> String(const Field& field) const;
  // A decimal integer in [min, max].
  absl::StatusOr<int64_t> Integer(const Field& field, int64_t min, int64_t max) const;
  // A byte size with a unit (resources/byte_size.h): "80GiB", "2TiB".
  absl::StatusOr<uint64_t> Bytes(const Field& field) const;

 private:
  std::string source_;
};

// " (did you mean nvidia?)" when `word` is a near miss (edit distance <= 2) of one of `options`,
// else "".
std::string DidYouMean(std::string_view word, const std::vector<std::string>& options);

// "a map", "a list", "the string "x"", "nothing (null)": for "expected X, got Y" messages.
std::string KindName(const YAML::Node& node);

}  // namespace tessera::simulated
