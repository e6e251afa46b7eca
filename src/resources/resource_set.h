// ResourceSet: named quantities (CPU=8,GPU=4,memory=64GiB) with exact, checked arithmetic. Used
// for node totals, availability and task demands alike.
#pragma once

#include <array>
#include <map>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "resources/quantity.h"

namespace tessera {

// Resources measured in bytes: they are written with a byte unit ("64GiB") and stored as a
// Quantity of bytes. The one list of them.
inline constexpr std::array<std::string_view, 2> kByteResources = {"memory", "object_store_memory"};
bool IsByteResource(std::string_view name);

// A resource name starts with a letter; then letters, digits and _ - . : / ("GPU",
// "accelerator_type:H100", "neuron_cores"); at most 256 characters.
absl::Status ValidateResourceName(std::string_view name);

// Not thread-safe; copyable value. Holds only positive quantities: setting zero removes the
// entry, so two sets with the same non-zero entries compare equal. Iterates sorted by name.
class ResourceSet {
 public:
  using Map = std::map<std::string, Quantity, std::less<>>;
  using const_iterator = Map::const_iterator;

  ResourceSet() = default;

  // Amounts as a program writes them, by name: {{"CPU", 1}, {"GPU", 0.5}, {"memory", 2e9}}
  // (bytes for kByteResources, a whole number). Names are validated (ValidateResourceName),
  // amounts converted exactly (Quantity::FromDouble); zeros are dropped. One-line errors name the
  // resource: resource "GPU": quantity -1 is negative.
  static absl::StatusOr<ResourceSet> FromAmounts(const std::map<std::string, double>& amounts);

  // `quantity` must not be negative (aborts: a programming error; parsers reject negatives).
  // The name is not validated here; names from outside go through ValidateResourceName or
  // ParseResourceSet.
  void Set(std::string name, Quantity quantity);
  // Zero when absent.
  Quantity Get(std::string_view name) const;

  // True when every demand in `demand` fits: Get(name) >= quantity for each of its entries.
  bool Contains(const ResourceSet& demand) const;

  // Entry-wise sum; an overflow is an error naming the resource.
  absl::StatusOr<ResourceSet> Plus(const ResourceSet& other) const;
  // Entry-wise difference; going below zero is an error naming the resource.
  absl::StatusOr<ResourceSet> Minus(const ResourceSet& other) const;

  bool empty() const { return values_.empty(); }
  size_t size() const { return values_.size(); }
  const_iterator begin() const { return values_.begin(); }
  const_iterator end() const { return values_.end(); }

  // "CPU=8,GPU=4,memory=64GiB": sorted by name, byte resources with a unit (FormatByteQuantity),
  // others as plain decimals. ParseResourceSet(ToString()) == *this. Empty set: "".
  std::string ToString() const;

  friend bool operator==(const ResourceSet&, const ResourceSet&) = default;
  // By name, then amount: an order for keys (a lease shape's), not a comparison of sizes.
  friend auto operator<=>(const ResourceSet&, const ResourceSet&) = default;

 private:
  Map values_;
};

// Parses "CPU=8,GPU=4,memory=64GiB,my_res=2.5". Pairs split on ',', names and values trimmed;
// empty text (or only spaces) is the empty set; zero values are accepted and dropped. Byte
// resources (kByteResources) need a byte unit; every other resource takes a plain decimal
// (Quantity::Parse). Errors are one line naming the offending token, e.g.
//   resource "GPU": "-1" is negative
absl::StatusOr<ResourceSet> ParseResourceSet(std::string_view text);

// One amount in the exact form ResourceSet::ToString writes it: "64GiB" for a byte resource,
// "2.5" otherwise, "0" for zero.
std::string FormatResourceAmount(std::string_view name, Quantity quantity);

}  // namespace tessera
