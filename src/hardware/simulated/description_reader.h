// Reading a YAML hardware description with errors that point at the text: every error is one
// line "<source>:<line>:<column>: <field path>: <problem>". Wraps yaml-cpp's node access so no
// exception leaves; ParseDocument still catches them at a file parser's boundary, for safety.
// Not thread-safe; one reader per parse.
#pragma once

#include <cstdint>
#include <exception>
#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
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

  // The no-exceptions wall of a file's parser: loads `yaml` (a syntax error is "invalid YAML:
  // ..." at its position) and returns what `parse` (an absl::StatusOr of the file's contents)
  // makes of its root node. A yaml-cpp exception or any other that escapes `parse` is an error
  // at its position, or at none.
  template <typename Parse>
  auto ParseDocument(std::string_view yaml, Parse&& parse) const
      -> decltype(parse(std::declval<const YAML::Node&>())) {
    try {
      YAML::Node root;
      try {
        root = YAML::Load(std::string(yaml));
      } catch (const YAML::Exception& e) {
        return ErrorAt(e.mark, absl::StrCat("invalid YAML: ", e.msg));
      }
      return parse(std::as_const(root));
    } catch (const YAML::Exception& e) {
      return ErrorAt(e.mark, e.msg);
    } catch (const std::exception& e) {
      return ErrorAt(YAML::Mark::null_mark(), e.what());
    }
  }

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
