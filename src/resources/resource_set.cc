#include "resources/resource_set.h"

#include <cstdio>
#include <cstdlib>
#include <set>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "base/string_util.h"
#include "resources/byte_size.h"

namespace tessera {
namespace {

constexpr size_t kMaxResourceNameLength = 256;

bool IsLetter(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }
bool IsDigit(char c) { return c >= '0' && c <= '9'; }
bool IsNameChar(char c) {
  return IsLetter(c) || IsDigit(c) || c == '_' || c == '-' || c == '.' || c == ':' || c == '/';
}

// "8GiB" on a unit-less resource: a number followed only by letters.
bool LooksLikeNumberWithUnit(std::string_view value) {
  size_t i = 0;
  while (i < value.size() && (IsDigit(value[i]) || value[i] == '.')) ++i;
  if (i == 0) return false;
  std::string_view rest = Trim(value.substr(i));
  if (rest.empty()) return false;
  for (char c : rest) {
    if (!IsLetter(c)) return false;
  }
  return true;
}

absl::StatusOr<Quantity> ParseValue(std::string_view name, std::string_view value) {
  const std::string prefix = absl::StrCat("resource ", Quote(name), ": ");
  absl::StatusOr<Quantity> quantity;
  if (IsByteResource(name)) {
    quantity = ParseByteQuantity(value);
  } else {
    quantity = Quantity::Parse(value);
    if (!quantity.ok() && LooksLikeNumberWithUnit(value)) {
      return absl::InvalidArgumentError(
          absl::StrCat(prefix, Quote(value), " has a unit, but ", ToAbsl(name),
                       " takes a plain number (only memory and object_store_memory take byte "
                       "units)"));
    }
  }
  if (!quantity.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(prefix, quantity.status().message()));
  }
  return quantity;
}

}  // namespace

bool IsByteResource(std::string_view name) {
  for (std::string_view r : kByteResources) {
    if (r == name) return true;
  }
  return false;
}

absl::Status ValidateResourceName(std::string_view name) {
  if (name.empty()) return absl::InvalidArgumentError("resource name is empty");
  if (name.size() > kMaxResourceNameLength) {
    return absl::InvalidArgumentError(absl::StrCat("resource name ", Quote(name.substr(0, 32)),
                                                   "... is longer than 256 characters"));
  }
  if (!IsLetter(name[0])) {
    return absl::InvalidArgumentError(
        absl::StrCat("resource name ", Quote(name), " must start with a letter"));
  }
  for (size_t i = 0; i < name.size(); ++i) {
    if (!IsNameChar(name[i])) {
      return absl::InvalidArgumentError(absl::StrCat(
          "resource name ", Quote(name), " has an invalid character ", Quote(name.substr(i, 1)),
          " at position ", i + 1, " (allowed: letters, digits and _ - . : /)"));
    }
  }
  return absl::OkStatus();
}

void ResourceSet::Set(std::string name, Quantity quantity) {
  if (quantity.IsNegative()) {
    std::fprintf(stderr, "ResourceSet::Set(%s, %s): negative quantity\n", name.c_str(),
                 quantity.ToString().c_str());
    std::abort();
  }
  if (quantity.IsZero()) {
    values_.erase(name);
  } else {
    values_[std::move(name)] = quantity;
  }
}

Quantity ResourceSet::Get(std::string_view name) const {
  auto it = values_.find(name);
  return it == values_.end() ? Quantity() : it->second;
}

bool ResourceSet::Contains(const ResourceSet& demand) const {
  for (const auto& [name, quantity] : demand) {
    if (Get(name) < quantity) return false;
  }
  return true;
}

absl::StatusOr<ResourceSet> ResourceSet::Plus(const ResourceSet& other) const {
  ResourceSet out = *this;
  for (const auto& [name, quantity] : other) {
    auto sum = Quantity::CheckedAdd(Get(name), quantity);
    if (!sum.ok()) {
      return absl::OutOfRangeError(
          absl::StrCat("resource ", Quote(name), ": ", sum.status().message()));
    }
    out.Set(name, *sum);
  }
  return out;
}

absl::StatusOr<ResourceSet> ResourceSet::Minus(const ResourceSet& other) const {
  ResourceSet out = *this;
  for (const auto& [name, quantity] : other) {
    const Quantity have = Get(name);
    if (have < quantity) {
      return absl::FailedPreconditionError(
          absl::StrCat("resource ", Quote(name), ": cannot subtract ", quantity.ToString(),
                       " from ", have.ToString(), " (the result would be negative)"));
    }
    out.Set(name, Quantity::FromRaw(have.raw() - quantity.raw()));
  }
  return out;
}

std::string FormatResourceAmount(std::string_view name, Quantity quantity) {
  if (quantity.IsZero()) return "0";
  return IsByteResource(name) ? FormatByteQuantity(quantity) : quantity.ToString();
}

std::string ResourceSet::ToString() const {
  std::string out;
  for (const auto& [name, quantity] : values_) {
    if (!out.empty()) out += ',';
    absl::StrAppend(&out, name, "=", FormatResourceAmount(name, quantity));
  }
  return out;
}

absl::StatusOr<ResourceSet> ResourceSet::FromAmounts(const std::map<std::string, double>& amounts) {
  ResourceSet out;
  for (const auto& [name, amount] : amounts) {
    TESSERA_RETURN_IF_ERROR(ValidateResourceName(name));
    auto quantity = Quantity::FromDouble(amount);
    if (!quantity.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("resource ", Quote(name), ": ", quantity.status().message()));
    }
    if (IsByteResource(name) && !quantity->IsInteger()) {
      return absl::InvalidArgumentError(
          absl::StrCat("resource ", Quote(name), ": ", amount, " is not a whole number of bytes"));
    }
    if (!quantity->IsZero()) out.Set(name, *quantity);
  }
  return out;
}

absl::StatusOr<ResourceSet> ParseResourceSet(std::string_view text) {
  ResourceSet out;
  if (Trim(text).empty()) return out;
  std::set<std::string, std::less<>> seen;  // zero values are dropped but still count as given
  size_t start = 0;
  for (size_t index = 1;; ++index) {
    const size_t comma = text.find(',', start);
    const std::string_view pair = text.substr(
        start, comma == std::string_view::npos ? std::string_view::npos : comma - start);
    if (Trim(pair).empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("resource set ", Quote(text), ": entry ", index, " is empty"));
    }
    const size_t equals = pair.find('=');
    if (equals == std::string_view::npos) {
      return absl::InvalidArgumentError(absl::StrCat(
          "resource entry ", Quote(Trim(pair)), " has no '=' (expected name=value, e.g. CPU=8)"));
    }
    const std::string_view name = Trim(pair.substr(0, equals));
    const std::string_view value = Trim(pair.substr(equals + 1));
    if (name.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("resource entry ", Quote(Trim(pair)), " has an empty name"));
    }
    TESSERA_RETURN_IF_ERROR(ValidateResourceName(name));
    if (!seen.emplace(name).second) {
      return absl::InvalidArgumentError(absl::StrCat("resource ", Quote(name), " is given twice"));
    }
    TESSERA_ASSIGN_OR_RETURN(const Quantity quantity, ParseValue(name, value));
    out.Set(std::string(name), quantity);
    if (comma == std::string_view::npos) break;
    start = comma + 1;
  }
  return out;
}

}  // namespace tessera
