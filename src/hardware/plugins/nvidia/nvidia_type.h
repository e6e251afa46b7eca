// The accelerator type string of an NVIDIA GPU (reference §2), from its NVML or /proc name.
#pragma once

#include <string>
#include <string_view>

namespace tessera {

// Data-center parts: the first model token after the vendor words ("NVIDIA", "Tesla"), with
// any suffix after '-' dropped, so types match the constants users already write:
//   "NVIDIA H100 80GB HBM3" -> "H100", "Tesla V100-SXM2-16GB" -> "V100", "NVIDIA A10G" -> "A10G".
// Consumer and workstation parts, whose first model token is a series word (RTX, GTX, GT, TITAN,
// after dropping the brand words "GeForce" and "Quadro"): the series word and the following
// tokens up to and including the first one with a digit, plus variant words right after it
// (Ti, SUPER, Ada, D), joined with '-':
//   "NVIDIA GeForce RTX 4090" -> "RTX-4090", "NVIDIA GeForce RTX 4070 Ti SUPER" ->
//   "RTX-4070-Ti-SUPER", "NVIDIA RTX A6000" -> "RTX-A6000", "NVIDIA RTX 6000 Ada Generation" ->
//   "RTX-6000-Ada", "NVIDIA TITAN RTX" -> "TITAN-RTX".
// Characters outside [A-Za-z0-9._-] are dropped so the result is a valid label value; an empty
// or unrecognisable name gives "".
std::string NvidiaTypeString(std::string_view name);

}  // namespace tessera
