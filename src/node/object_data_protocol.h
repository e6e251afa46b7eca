// The wire format of the agents' raw TCP data connection for objects (object_data_server.h): the
// pulling agent sends one fixed-size request naming the one-time ticket it got from the holder's
// OfferObject RPC; the holder answers one reply header (a status code, the object's size, a
// short message), then the object's bytes sealed under the offer's transfer key
// (object_data_cipher.h: SealedSize(size) bytes of AES-256-GCM chunks with their tags), then
// closes. The header itself is not sealed: a forged one can only fail the pull.
//
//   request: "TSDQ" | action u8 (1 send, 2 drop the ticket) | ticket (kDataTicketBytes)
//   reply:   "TSDR" | code u8 (absl::StatusCode) | size u64 LE | message length u16 LE | message
//
// Threading: pure functions.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace tessera {

inline constexpr size_t kDataTicketBytes = 32;
inline constexpr size_t kDataRequestBytes = 4 + 1 + kDataTicketBytes;
inline constexpr size_t kDataReplyHeaderBytes = 4 + 1 + 8 + 2;
// A reply's message is a one-line error; longer ones are cut.
inline constexpr size_t kMaxDataMessageBytes = 1024;

enum class DataAction : uint8_t { kSend = 1, kDrop = 2 };

struct DataRequest {
  DataAction action = DataAction::kSend;
  std::string ticket;  // kDataTicketBytes
  bool operator==(const DataRequest&) const = default;
};

struct DataReplyHeader {
  absl::StatusCode code = absl::StatusCode::kOk;
  uint64_t size = 0;           // the object's size, sealed after the message (0 unless kOk)
  uint16_t message_bytes = 0;  // the message that follows the header
  bool operator==(const DataReplyHeader&) const = default;
};

// Both encoders require well-formed input (a ticket of kDataTicketBytes).
std::string EncodeDataRequest(const DataRequest& request);
// `message` is cut to kMaxDataMessageBytes.
std::string EncodeDataReply(absl::StatusCode code, uint64_t size, std::string_view message);

// InvalidArgument, naming the problem, for anything but exactly one well-formed request.
absl::StatusOr<DataRequest> ParseDataRequest(std::string_view bytes);
// `bytes` is exactly kDataReplyHeaderBytes. InvalidArgument for a bad magic, an unknown code, a
// size with an error code, or a message longer than kMaxDataMessageBytes.
absl::StatusOr<DataReplyHeader> ParseDataReplyHeader(std::string_view bytes);

}  // namespace tessera
