#include "serve_runtime/python_call_codec.h"

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "base/status_macros.h"

namespace tessera::serve {
namespace {

// The value format (serialization.py).
constexpr size_t kAlignment = 64;
constexpr uint8_t kFixArray4 = 0x94;
constexpr uint8_t kExt32 = 0xc9;
constexpr uint8_t kArray32 = 0xdd;
constexpr uint8_t kBin32 = 0xc6;
constexpr uint8_t kHeaderExtType = 80;
constexpr uint8_t kFormatVersion = 1;
// What comes before a pickle of n bytes and the empty REGION's data besides the padding: the
// fixarray, the header's ext32 head, version and buffer count, the empty REFS array head and the
// two bin32 heads.
constexpr size_t kPlainFixedBytes = 1 + 6 + 5 + 5 + 5 + 5;

// CPython's framing (pickle.py's _Framer, _pickle.c): a frame is written out at the start of the
// next save() once it holds this much, and a str or bytes this large goes outside any frame.
constexpr size_t kFrameSizeTarget = 64 * 1024;
constexpr size_t kFrameSizeMin = 4;  // a smaller frame is written without its FRAME header

// Pickle opcodes (pickletools' names).
enum Opcode : uint8_t {
  kProto = 0x80,
  kFrame = 0x95,
  kStop = '.',
  kMemoize = 0x94,
  kNone = 'N',
  kNewTrue = 0x88,
  kNewFalse = 0x89,
  kBinInt = 'J',
  kBinInt1 = 'K',
  kBinInt2 = 'M',
  kLong1 = 0x8a,
  kLong4 = 0x8b,
  kShortBinUnicode = 0x8c,
  kBinUnicode = 'X',
  kBinUnicode8 = 0x8d,
  kShortBinBytes = 'C',
  kBinBytes = 'B',
  kBinBytes8 = 0x8e,
  kEmptyTuple = ')',
  kEmptyDict = '}',
  kTuple1 = 0x85,
  kTuple2 = 0x86,
  kStackGlobal = 0x93,
};

void AppendBigEndian32(std::string& out, uint32_t value) {
  for (int shift = 24; shift >= 0; shift -= 8) out.push_back(static_cast<char>(value >> shift));
}

void AppendLittleEndian(std::string& out, uint64_t value, int bytes) {
  for (int i = 0; i < bytes; ++i) out.push_back(static_cast<char>(value >> (8 * i)));
}

std::string Opcodes(std::initializer_list<uint8_t> opcodes) {
  std::string out;
  for (uint8_t opcode : opcodes) out.push_back(static_cast<char>(opcode));
  return out;
}

// Writes a pickle's opcodes into frames as CPython does.
class Framer {
 public:
  explicit Framer(std::string* out) : out_(out) {}

  void Write(std::string_view bytes) { frame_.append(bytes); }
  // pickle.py's commit_frame() at the start of a save(): a frame that reached the target ends.
  void Boundary() {
    if (frame_.size() >= kFrameSizeTarget) Commit();
  }
  // _write_large_bytes: the frame so far ends, then `header` and `payload` go outside any frame.
  void WriteLarge(std::string_view header, std::string_view payload) {
    Commit();
    out_->append(header);
    out_->append(payload);
  }
  void Commit() {
    if (frame_.size() >= kFrameSizeMin) {
      out_->push_back(static_cast<char>(kFrame));
      AppendLittleEndian(*out_, frame_.size(), 8);
    }
    out_->append(frame_);
    frame_.clear();
  }

 private:
  std::string* const out_;
  std::string frame_;
};

// save_str / save_bytes of protocol 5: the opcode by size, then the payload, then MEMOIZE.
void SaveScalar(Framer& framer, std::string_view data, bool as_str) {
  const uint64_t n = data.size();
  std::string header;
  if (n <= 0xff) {
    header.push_back(static_cast<char>(as_str ? kShortBinUnicode : kShortBinBytes));
    AppendLittleEndian(header, n, 1);
  } else if (n <= 0xffffffffu) {
    header.push_back(static_cast<char>(as_str ? kBinUnicode : kBinBytes));
    AppendLittleEndian(header, n, 4);
  } else {
    header.push_back(static_cast<char>(as_str ? kBinUnicode8 : kBinBytes8));
    AppendLittleEndian(header, n, 8);
  }
  if (n >= kFrameSizeTarget) {
    framer.WriteLarge(header, data);
  } else {
    framer.Write(header);
    framer.Write(data);
  }
  framer.Write(Opcodes({kMemoize}));
}

// The value around a pickle with no out-of-band buffers and no refs.
std::string PlainValue(std::string_view pickle) {
  const size_t n = pickle.size();
  const size_t padding = (kAlignment - (kPlainFixedBytes + n) % kAlignment) % kAlignment;
  std::string out;
  out.reserve(kPlainFixedBytes + padding + n);
  out.push_back(static_cast<char>(kFixArray4));
  out.push_back(static_cast<char>(kExt32));
  AppendBigEndian32(out, static_cast<uint32_t>(5 + padding));
  out.push_back(static_cast<char>(kHeaderExtType));
  out.push_back(static_cast<char>(kFormatVersion));
  AppendBigEndian32(out, 0);  // no out-of-band buffers
  out.append(padding, '\0');
  out.push_back(static_cast<char>(kArray32));
  AppendBigEndian32(out, 0);  // no refs
  out.push_back(static_cast<char>(kBin32));
  AppendBigEndian32(out, static_cast<uint32_t>(n));
  out.append(pickle);
  out.push_back(static_cast<char>(kBin32));
  AppendBigEndian32(out, 0);  // an empty region
  return out;
}

absl::Status Malformed(std::string_view what) {
  return absl::InvalidArgumentError(
      absl::StrCat("not a Python value of the tessera format: ", std::string(what)));
}

// Bounds-checked reads of the value's bytes.
class Reader {
 public:
  explicit Reader(std::string_view data) : data_(data) {}

  size_t pos() const { return pos_; }
  bool at_end() const { return pos_ == data_.size(); }
  size_t left() const { return data_.size() - pos_; }

  std::optional<std::string_view> Take(size_t n) {
    if (n > left()) return std::nullopt;
    std::string_view piece = data_.substr(pos_, n);
    pos_ += n;
    return piece;
  }
  std::optional<uint64_t> BigEndian(int bytes) { return Number(bytes, /*little=*/false); }
  std::optional<uint64_t> LittleEndian(int bytes) { return Number(bytes, /*little=*/true); }

 private:
  std::optional<uint64_t> Number(int bytes, bool little) {
    std::optional<std::string_view> piece = Take(static_cast<size_t>(bytes));
    if (!piece.has_value()) return std::nullopt;
    uint64_t value = 0;
    for (int i = 0; i < bytes; ++i) {
      const uint64_t byte = static_cast<uint8_t>((*piece)[static_cast<size_t>(i)]);
      value |= byte << (8 * (little ? i : bytes - 1 - i));
    }
    return value;
  }

  std::string_view data_;
  size_t pos_ = 0;
};

// Reads a msgpack head: its marker, then a big-endian u32.
absl::StatusOr<uint32_t> ReadHead(Reader& reader, uint8_t marker, std::string_view what) {
  const size_t at = reader.pos();
  std::optional<uint64_t> found = reader.BigEndian(1);
  std::optional<uint64_t> size = reader.BigEndian(4);
  if (!found.has_value() || !size.has_value()) {
    return Malformed(absl::StrCat(std::string(what), " at byte ", at, " runs past the end"));
  }
  if (*found != marker) {
    return Malformed(absl::StrFormat("%s at byte %d has marker 0x%02x, not 0x%02x",
                                     std::string(what), at, static_cast<int>(*found),
                                     static_cast<int>(marker)));
  }
  return static_cast<uint32_t>(*size);
}

// The pickle of a value with no out-of-band buffers and no refs.
absl::StatusOr<std::string_view> PickleOf(std::string_view value) {
  Reader reader(value);
  std::optional<uint64_t> first = reader.BigEndian(1);
  if (!first.has_value() || *first != kFixArray4) return Malformed("it does not start with 0x94");
  const size_t header_at = reader.pos();
  std::optional<uint64_t> marker = reader.BigEndian(1);
  std::optional<uint64_t> header_size = reader.BigEndian(4);
  std::optional<uint64_t> ext_type = reader.BigEndian(1);
  if (!marker.has_value() || !header_size.has_value() || !ext_type.has_value() ||
      *marker != kExt32 || *ext_type != kHeaderExtType) {
    return Malformed(absl::StrCat("no header (ext32 of type 80) at byte ", header_at));
  }
  std::optional<std::string_view> header = reader.Take(*header_size);
  if (!header.has_value() || header->size() < 5) return Malformed("its header runs past the end");
  Reader fields(*header);
  if (fields.BigEndian(1) != kFormatVersion) return Malformed("its format version is not 1");
  if (fields.BigEndian(4) != 0) {
    return Malformed("it has out-of-band buffers, which no scalar result has");
  }
  TESSERA_ASSIGN_OR_RETURN(uint32_t refs, ReadHead(reader, kArray32, "the refs"));
  if (refs != 0) return Malformed("it holds refs, which no scalar result has");
  TESSERA_ASSIGN_OR_RETURN(uint32_t pickle_size, ReadHead(reader, kBin32, "the pickle"));
  std::optional<std::string_view> pickle = reader.Take(pickle_size);
  if (!pickle.has_value()) return Malformed("its pickle runs past the end");
  return *pickle;
}

std::string OpcodeName(uint8_t opcode) {
  switch (opcode) {
    case kEmptyTuple: return "EMPTY_TUPLE";
    case kEmptyDict: return "EMPTY_DICT";
    case ']': return "EMPTY_LIST";
    case kTuple1: return "TUPLE1";
    case kTuple2: return "TUPLE2";
    case 0x87: return "TUPLE3";
    case '(': return "MARK";
    case 'G': return "BINFLOAT";
    case kStackGlobal: return "STACK_GLOBAL";
    case 'c': return "GLOBAL";
    case 'R': return "REDUCE";
    case 0x81: return "NEWOBJ";
    case 'b': return "BUILD";
    case 'h': return "BINGET";
    case 'q': return "BINPUT";
    case 0x97: return "NEXT_BUFFER";
    case 0x96: return "BYTEARRAY8";
    case 'Q': return "BINPERSID";
    default: return "";
  }
}

absl::Status Unexpected(uint8_t opcode, size_t at) {
  const std::string name = OpcodeName(opcode);
  return absl::InvalidArgumentError(absl::StrFormat(
      "a result's pickle has opcode 0x%02x%s at byte %d: only None, bool, int, str and bytes "
      "results are read",
      static_cast<int>(opcode), name.empty() ? std::string() : absl::StrCat(" (", name, ")"), at));
}

// Two's complement, little-endian, at most 8 bytes (LONG1 and LONG4's payload).
absl::StatusOr<std::string> DecimalOfLong(std::string_view bytes) {
  if (bytes.size() > 8) {
    return absl::InvalidArgumentError(
        absl::StrCat("a result's int of ", bytes.size(), " bytes is past 64 bits"));
  }
  if (bytes.empty()) return std::string("0");
  uint64_t value = 0;
  for (size_t i = 0; i < bytes.size(); ++i) {
    value |= static_cast<uint64_t>(static_cast<uint8_t>(bytes[i])) << (8 * i);
  }
  const bool negative = (static_cast<uint8_t>(bytes.back()) & 0x80) != 0;
  if (negative && bytes.size() < 8) value |= ~uint64_t{0} << (8 * bytes.size());
  return absl::StrCat(static_cast<int64_t>(value));
}

// One scalar opcode's value (the opcode already read); nullopt when `opcode` is none of them.
std::optional<absl::StatusOr<std::string>> ReadScalar(uint8_t opcode, Reader& reader) {
  const absl::Status short_pickle = absl::InvalidArgumentError("a result's pickle ends early");
  auto sized = [&](int length_bytes) -> absl::StatusOr<std::string> {
    std::optional<uint64_t> size = reader.LittleEndian(length_bytes);
    if (!size.has_value()) return short_pickle;
    std::optional<std::string_view> data = reader.Take(*size);
    if (!data.has_value()) return short_pickle;
    return std::string(*data);
  };
  auto fixed_int = [&](int bytes, bool is_signed) -> absl::StatusOr<std::string> {
    std::optional<uint64_t> value = reader.LittleEndian(bytes);
    if (!value.has_value()) return short_pickle;
    if (is_signed) return absl::StrCat(static_cast<int32_t>(static_cast<uint32_t>(*value)));
    return absl::StrCat(*value);
  };
  switch (opcode) {
    case kNone: return std::string();
    case kNewTrue: return std::string("True");
    case kNewFalse: return std::string("False");
    case kBinInt1: return fixed_int(1, false);
    case kBinInt2: return fixed_int(2, false);
    case kBinInt: return fixed_int(4, true);
    case kLong1:
    case kLong4: {
      absl::StatusOr<std::string> bytes = sized(opcode == kLong1 ? 1 : 4);
      if (!bytes.ok()) return absl::StatusOr<std::string>(bytes.status());
      return DecimalOfLong(*bytes);
    }
    case kShortBinUnicode:
    case kShortBinBytes: return sized(1);
    case kBinUnicode:
    case kBinBytes: return sized(4);
    case kBinUnicode8:
    case kBinBytes8: return sized(8);
    default: return std::nullopt;
  }
}

absl::StatusOr<std::string> ReadPickledScalar(std::string_view pickle) {
  Reader reader(pickle);
  std::optional<std::string> value;
  while (!reader.at_end()) {
    const size_t at = reader.pos();
    const uint8_t opcode = static_cast<uint8_t>(*reader.BigEndian(1));
    if (opcode == kProto) {
      std::optional<uint64_t> version = reader.BigEndian(1);
      if (!version.has_value() || *version > 5) {
        return absl::InvalidArgumentError("a result's pickle has no protocol 0..5");
      }
    } else if (opcode == kFrame) {
      // The frame's bytes are the opcodes that follow; only its length is checked.
      std::optional<uint64_t> length = reader.LittleEndian(8);
      if (!length.has_value() || *length > reader.left()) {
        return absl::InvalidArgumentError("a result's pickle has a frame past its end");
      }
    } else if (opcode == kMemoize) {
      if (!value.has_value()) return Unexpected(opcode, at);
    } else if (opcode == kStop) {
      if (!value.has_value()) return absl::InvalidArgumentError("a result's pickle holds nothing");
      if (!reader.at_end()) {
        return absl::InvalidArgumentError("a result's pickle has bytes after its STOP");
      }
      return *std::move(value);
    } else {
      std::optional<absl::StatusOr<std::string>> scalar = ReadScalar(opcode, reader);
      if (!scalar.has_value() || value.has_value()) return Unexpected(opcode, at);
      if (!scalar->ok()) return scalar->status();
      value = **std::move(scalar);
    }
  }
  return absl::InvalidArgumentError("a result's pickle ends without STOP");
}

}  // namespace

std::string EncodeCallArguments(const std::optional<std::string>& arg, bool as_str) {
  std::string pickle = Opcodes({kProto, 5});
  Framer framer(&pickle);
  if (!arg.has_value()) {
    framer.Write(Opcodes({kEmptyTuple, kEmptyDict, kMemoize, kTuple2, kMemoize, kStop}));
  } else {
    // save((args, kwargs)) -> save(args) -> save(arg): each save() starts at a frame boundary.
    SaveScalar(framer, *arg, as_str);
    framer.Write(Opcodes({kTuple1, kMemoize}));
    framer.Boundary();  // save(kwargs)
    framer.Write(Opcodes({kEmptyDict, kMemoize, kTuple2, kMemoize, kStop}));
  }
  framer.Commit();
  return PlainValue(pickle);
}

std::string EncodeGlobalReference(std::string_view module, std::string_view qualname) {
  std::string pickle = Opcodes({kProto, 5});
  Framer framer(&pickle);
  SaveScalar(framer, module, /*as_str=*/true);
  SaveScalar(framer, qualname, /*as_str=*/true);
  framer.Write(Opcodes({kStackGlobal, kMemoize, kStop}));
  framer.Commit();
  return PlainValue(pickle);
}

absl::StatusOr<std::string> DecodeResult(std::string_view value) {
  TESSERA_ASSIGN_OR_RETURN(std::string_view pickle, PickleOf(value));
  return ReadPickledScalar(pickle);
}

std::string EncodeFrame(std::string_view head, std::string_view body) {
  std::string frame;
  frame.reserve(4 + head.size() + body.size());
  AppendBigEndian32(frame, static_cast<uint32_t>(head.size()));
  frame.append(head);
  frame.append(body);
  return frame;
}

absl::StatusOr<FrameParts> SplitFrame(std::string_view frame) {
  Reader reader(frame);
  std::optional<uint64_t> length = reader.BigEndian(4);
  if (!length.has_value()) {
    return absl::InvalidArgumentError(
        absl::StrCat("an HTTP frame needs at least 4 bytes, got ", frame.size()));
  }
  std::optional<std::string_view> head = reader.Take(*length);
  if (!head.has_value()) {
    return absl::InvalidArgumentError(absl::StrCat("an HTTP frame's head is ", *length,
                                                   " bytes, but only ", reader.left(),
                                                   " follow its length"));
  }
  return FrameParts{.head = *head, .body = frame.substr(reader.pos())};
}

}  // namespace tessera::serve
