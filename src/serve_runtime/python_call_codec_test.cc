// The Python value codec against bytes derived by hand from the value format
// (serialization.py's docstring) and the pickle protocol (pickletools), each of which is also
// what CPython 3.11's tessera._private.serialization.serialize gives for the same value.
#include "serve_runtime/python_call_codec.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstddef>
#include <string>
#include <string_view>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"

namespace tessera::serve {
namespace {

using ::testing::HasSubstr;

std::string Bytes(std::string_view hex) { return absl::HexStringToBytes(std::string(hex)); }
std::string Hex(std::string_view bytes) { return absl::BytesToHexString(std::string(bytes)); }

// The value head of a pickle of `n` bytes: fixarray(4), ext32 (length 5 + padding, type 80),
// version 1, 0 buffers, zero padding putting the region's data on a 64-byte boundary, REFS as an
// empty array32, the pickle's bin32 head. 27 fixed bytes come before the region's data.
std::string HeadFor(size_t n) {
  const size_t padding = (64 - (27 + n) % 64) % 64;
  std::string head =
      Bytes(absl::StrCat("94c9", absl::Hex(5 + padding, absl::kZeroPad8), "50", "0100000000"));
  head.append(padding, '\0');
  head += Bytes(absl::StrCat("dd00000000c6", absl::Hex(n, absl::kZeroPad8)));
  return head;
}
const std::string kEmptyRegion = Bytes("c600000000");

TEST(EncodeCallArgumentsTest, OneBytesArgument) {
  // ((b"ab",), {}): PROTO 5; FRAME 12; SHORT_BINBYTES 2 "ab"; MEMOIZE; TUPLE1; MEMOIZE;
  // EMPTY_DICT; MEMOIZE; TUPLE2; MEMOIZE; STOP. 23 bytes of pickle: 27 + 23 = 50, so 14 bytes of
  // padding and an ext32 length of 19.
  EXPECT_EQ(Hex(EncodeCallArguments(std::string("ab"), /*as_str=*/false)),
            "94c9000000135001000000000000000000000000000000000000dd00000000c600000017"
            "8005950c00000000000000430261629485947d9486942e"
            "c600000000");
}

TEST(EncodeCallArgumentsTest, NoArgument) {
  // ((), {}): EMPTY_TUPLE (never memoized), EMPTY_DICT, MEMOIZE, TUPLE2, MEMOIZE, STOP in a frame
  // of 6; 17 bytes of pickle, 20 of padding.
  EXPECT_EQ(Hex(EncodeCallArguments(std::nullopt, false)),
            "94c9000000195001000000000000000000000000000000000000000000000000dd00000000c600000011"
            "8005950600000000000000297d9486942e"
            "c600000000");
}

TEST(EncodeCallArgumentsTest, OneStrArgument) {
  // The same with SHORT_BINUNICODE (0x8c) for a str.
  EXPECT_EQ(Hex(EncodeCallArguments(std::string("ab"), /*as_str=*/true)),
            "94c9000000135001000000000000000000000000000000000000dd00000000c600000017"
            "8005950c000000000000008c0261629485947d9486942e"
            "c600000000");
}

TEST(EncodeCallArgumentsTest, MediumArgumentIsBinBytesInOneFrame) {
  // 300 bytes: BINBYTES with a 4-byte little-endian length, still inside the one frame.
  const std::string arg(300, 'x');
  const std::string pickle = Bytes(
                                 "8005"
                                 "953901000000000000"
                                 "422c010000") +
                             arg + Bytes("9485947d9486942e");
  EXPECT_EQ(Hex(EncodeCallArguments(arg, false)),
            Hex(HeadFor(pickle.size()) + pickle + kEmptyRegion));
}

TEST(EncodeCallArgumentsTest, LargeArgumentGoesOutsideAnyFrame) {
  // 70000 bytes (past the 64 KiB frame target): the empty frame is dropped, BINBYTES and the
  // payload are written unframed, and what follows is a frame of its own (8 bytes).
  const std::string arg(70000, 'x');
  const std::string pickle = Bytes(
                                 "8005"
                                 "4270110100") +
                             arg +
                             Bytes(
                                 "950800000000000000"
                                 "9485947d9486942e");
  const std::string value = EncodeCallArguments(arg, false);
  EXPECT_EQ(Hex(value), Hex(HeadFor(pickle.size()) + pickle + kEmptyRegion));
  EXPECT_EQ(value.size() % 64, 0u);  // the (empty) region's data, at the end, is aligned
}

TEST(EncodeCallArgumentsTest, FrameEndsAtTheNextSaveOnceItReachesTheTarget) {
  // 65530 bytes fit a frame, but the frame holds 5 + 65530 + 3 = 65538 bytes when the kwargs'
  // save() starts: it is written out there, and the kwargs go in a frame of their own (5 bytes).
  const std::string arg(65530, 'x');
  const std::string pickle = Bytes(
                                 "8005"
                                 "950200010000000000"
                                 "42faff0000") +
                             arg +
                             Bytes(
                                 "948594"
                                 "950500000000000000"
                                 "7d9486942e");
  EXPECT_EQ(Hex(EncodeCallArguments(arg, false)),
            Hex(HeadFor(pickle.size()) + pickle + kEmptyRegion));
}

TEST(EncodeGlobalReferenceTest, ClassByReference) {
  // What cloudpickle gives for collections.OrderedDict: PROTO 5; FRAME 31; SHORT_BINUNICODE
  // "collections"; MEMOIZE; SHORT_BINUNICODE "OrderedDict"; MEMOIZE; STACK_GLOBAL; MEMOIZE; STOP.
  const std::string pickle =
      Bytes("8005951f000000000000008c0b636f6c6c656374696f6e73948c0b4f726465726564446963749493942e");
  EXPECT_EQ(Hex(EncodeGlobalReference("collections", "OrderedDict")),
            Hex(HeadFor(pickle.size()) + pickle + kEmptyRegion));
}

// Values as CPython's serialize wrote them.
TEST(DecodeResultTest, Scalars) {
  struct Case {
    std::string hex;
    std::string text;
  };
  const Case cases[] = {
      // None: PROTO 5, NONE, STOP (3 bytes: no frame).
      {"94c90000002650010000000000000000000000000000000000000000000000000000000000000000000000"
       "0000dd00000000c60000000480054e2ec600000000",
       ""},
      {"94c90000002650010000000000000000000000000000000000000000000000000000000000000000000000"
       "0000dd00000000c6000000048005882ec600000000",
       "True"},
      {"94c90000002650010000000000000000000000000000000000000000000000000000000000000000000000"
       "0000dd00000000c6000000048005892ec600000000",
       "False"},
      // 5: BININT1.
      {"94c90000002550010000000000000000000000000000000000000000000000000000000000000000000000"
       "00dd00000000c60000000580054b052ec600000000",
       "5"},
      // -1: BININT, signed.
      {"94c9000000195001000000000000000000000000000000000000000000000000dd00000000c6000000118005"
       "9506000000000000004affffffff2ec600000000",
       "-1"},
      // 2**40: LONG1 of 6 bytes.
      {"94c9000000165001000000000000000000000000000000000000000000dd00000000c60000001480059509000"
       "000000000008a060000000000012ec600000000",
       "1099511627776"},
      // "héllo": SHORT_BINUNICODE, UTF-8, then MEMOIZE.
      {"94c90000001550010000000000000000000000000000000000000000dd00000000c6000000158005950a0000"
       "00000000008c0668c3a96c6c6f942ec600000000",
       "h\xc3\xa9llo"},
      // b"": SHORT_BINBYTES of 0.
      {"94c90000001b50010000000000000000000000000000000000000000000000000000dd00000000c60000000f"
       "80059504000000000000004300942ec600000000",
       ""},
  };
  for (const Case& c : cases) {
    absl::StatusOr<std::string> text = DecodeResult(Bytes(c.hex));
    ASSERT_TRUE(text.ok()) << c.hex << ": " << text.status();
    EXPECT_EQ(*text, c.text) << c.hex;
  }
}

TEST(DecodeResultTest, IntsAtTheEdgesOf64Bits) {
  auto decode = [](std::string_view pickle_hex) {
    const std::string pickle = Bytes(pickle_hex);
    return DecodeResult(HeadFor(pickle.size()) + pickle + kEmptyRegion);
  };
  EXPECT_EQ(decode("8005950b000000000000008a0800000000000000802e").value_or("<error>"),
            "-9223372036854775808");
  EXPECT_EQ(decode("8005950b000000000000008a08ffffffffffffff7f2e").value_or("<error>"),
            "9223372036854775807");
  EXPECT_EQ(decode("80059506000000000000004a7fffffff2e").value_or("<error>"), "-129");
  EXPECT_EQ(decode("80059504000000000000004d2c012e").value_or("<error>"), "300");  // BININT2
  // 2**64 needs 9 bytes.
  absl::StatusOr<std::string> big = decode("8005950c000000000000008a090000000000000000012e");
  EXPECT_EQ(big.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(big.status().message(), HasSubstr("past 64 bits"));
}

TEST(DecodeResultTest, LargeBytesOutsideAnyFrame) {
  const std::string payload(70000, 'y');
  const std::string pickle = Bytes(
                                 "8005"
                                 "4270110100") +
                             payload + Bytes("942e");
  absl::StatusOr<std::string> text = DecodeResult(HeadFor(pickle.size()) + pickle + kEmptyRegion);
  ASSERT_TRUE(text.ok()) << text.status();
  EXPECT_EQ(*text, payload);
}

TEST(DecodeResultTest, OtherTypesAreRefusedNamingTheOpcode) {
  // 2.5: BINFLOAT.
  absl::StatusOr<std::string> floating = DecodeResult(
      Bytes("94c90000001550010000000000000000000000000000000000000000dd00000000c6000000158005950a"
            "000000000000004740040000000000002ec600000000"));
  EXPECT_EQ(floating.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(floating.status().message(), HasSubstr("0x47 (BINFLOAT)"));
  // ("a",): a str, then TUPLE1.
  absl::StatusOr<std::string> tuple = DecodeResult(
      Bytes("94c90000001850010000000000000000000000000000000000000000000000dd00000000c60000001280"
            "059507000000000000008c01619485942ec600000000"));
  EXPECT_THAT(tuple.status().message(), HasSubstr("0x85 (TUPLE1)"));
  // [1]: EMPTY_LIST first.
  absl::StatusOr<std::string> list = DecodeResult(
      Bytes("94c9000000195001000000000000000000000000000000000000000000000000dd00000000c600000011"
            "80059506000000000000005d944b01612ec600000000"));
  EXPECT_THAT(list.status().message(), HasSubstr("0x5d (EMPTY_LIST)"));
  // A call's arguments are no result either.
  EXPECT_THAT(DecodeResult(EncodeCallArguments(std::string("ab"), false)).status().message(),
              HasSubstr("TUPLE1"));
}

TEST(DecodeResultTest, MalformedValuesAreRefused) {
  const std::string none = Bytes(
      "94c90000002650010000000000000000000000000000000000000000000000000000000000000000000000"
      "0000dd00000000c60000000480054e2ec600000000");
  auto code = [](std::string_view value) { return DecodeResult(value).status().code(); };
  EXPECT_EQ(code(""), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(code(none.substr(0, 40)), absl::StatusCode::kInvalidArgument);  // cut in its header
  EXPECT_EQ(code(none.substr(0, none.size() - 7)),
            absl::StatusCode::kInvalidArgument);  // cut in its pickle
  std::string with_buffer = none;
  with_buffer[11] = 1;  // one out-of-band buffer
  EXPECT_THAT(DecodeResult(with_buffer).status().message(), HasSubstr("out-of-band"));
  std::string no_stop = none;
  no_stop[none.size() - 6] = 'N';  // NONE twice, no STOP
  EXPECT_EQ(code(no_stop), absl::StatusCode::kInvalidArgument);
  // Bytes after STOP inside the pickle.
  const std::string trailing = Bytes("80054e2e4e");
  EXPECT_THAT(DecodeResult(HeadFor(trailing.size()) + trailing + kEmptyRegion).status().message(),
              HasSubstr("after its STOP"));
}

TEST(FrameTest, SplitsWhatItEncodes) {
  const std::string frame = EncodeFrame(R"({"status":200})", "body");
  EXPECT_EQ(Hex(frame.substr(0, 4)), "0000000e");
  absl::StatusOr<FrameParts> parts = SplitFrame(frame);
  ASSERT_TRUE(parts.ok()) << parts.status();
  EXPECT_EQ(parts->head, R"({"status":200})");
  EXPECT_EQ(parts->body, "body");
  EXPECT_EQ(SplitFrame(EncodeFrame("{}", "")).value_or(FrameParts{}).body, "");
}

TEST(FrameTest, ShortFramesAreRefused) {
  EXPECT_THAT(SplitFrame(std::string_view("\0\0", 2)).status().message(),
              HasSubstr("at least 4 bytes"));
  EXPECT_THAT(SplitFrame(Bytes("0000000a") + "{}").status().message(),
              HasSubstr("head is 10 bytes, but only 2 follow"));
}

}  // namespace
}  // namespace tessera::serve
