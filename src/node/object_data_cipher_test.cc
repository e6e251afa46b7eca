// The data connection's seal: chunks round-trip for every size around the chunk boundary, and
// a wrong key, chunk index or object size, a changed byte or a cut tag fail with DataLoss.
#include "node/object_data_cipher.h"

#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tessera {
namespace {

using ::testing::HasSubstr;

std::vector<uint8_t> Pattern(size_t size) {
  std::vector<uint8_t> data(size);
  for (size_t i = 0; i < size; ++i) data[i] = static_cast<uint8_t>(i * 13 + i / 1000);
  return data;
}

// Every chunk of `data`, sealed: the stream the holder writes.
std::vector<uint8_t> SealAll(const std::string& key, const std::vector<uint8_t>& data) {
  auto sealer = ChunkSealer::Create(key, data.size());
  EXPECT_TRUE(sealer.ok()) << sealer.status();
  std::vector<uint8_t> stream(SealedSize(data.size()));
  size_t in = 0;
  size_t out = 0;
  for (uint64_t i = 0; i < ChunkCount(data.size()); ++i) {
    const size_t n = ChunkPlaintextBytes(data.size(), i);
    EXPECT_TRUE(sealer->Seal(i, std::span(data.data() + in, n), stream.data() + out).ok());
    in += n;
    out += n + kSealTagBytes;
  }
  EXPECT_EQ(out, stream.size());
  return stream;
}

// Opens a stream of SealAll in place, as the puller does; the object's bytes or the failure.
absl::StatusOr<std::vector<uint8_t>> OpenAll(const std::string& key, uint64_t size,
                                             std::vector<uint8_t> stream) {
  auto opener = ChunkOpener::Create(key, size);
  if (!opener.ok()) return opener.status();
  std::vector<uint8_t> data;
  size_t at = 0;
  for (uint64_t i = 0; i < ChunkCount(size); ++i) {
    const size_t n = ChunkPlaintextBytes(size, i);
    if (absl::Status s = opener->Open(i, std::span(stream.data() + at, n),
                                      std::span(stream.data() + at + n, kSealTagBytes));
        !s.ok()) {
      return s;
    }
    data.insert(data.end(), stream.begin() + at, stream.begin() + at + n);
    at += n + kSealTagBytes;
  }
  return data;
}

TEST(ObjectDataCipherTest, SizesCountATagPerChunkAndAnEmptyObjectIsOneChunk) {
  EXPECT_EQ(ChunkCount(0), 1u);
  EXPECT_EQ(SealedSize(0), kSealTagBytes);
  EXPECT_EQ(ChunkCount(1), 1u);
  EXPECT_EQ(ChunkCount(kSealedChunkBytes), 1u);
  EXPECT_EQ(ChunkCount(kSealedChunkBytes + 1), 2u);
  EXPECT_EQ(ChunkPlaintextBytes(kSealedChunkBytes + 1, 1), 1u);
  EXPECT_EQ(SealedSize(uint64_t{1} << 30), (uint64_t{1} << 30) + 1024 * kSealTagBytes);
}

TEST(ObjectDataCipherTest, KeysAreFreshRandomBytes) {
  auto a = NewTransferKey();
  auto b = NewTransferKey();
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(a->size(), kTransferKeyBytes);
  EXPECT_NE(*a, *b);
}

TEST(ObjectDataCipherTest, ChunksRoundTripAndHideThePlaintext) {
  const std::string key = *NewTransferKey();
  for (size_t size : {size_t{0}, size_t{1}, size_t{1000}, kSealedChunkBytes - 1, kSealedChunkBytes,
                      kSealedChunkBytes + 1, 3 * kSealedChunkBytes + 12345}) {
    const std::vector<uint8_t> data = Pattern(size);
    const std::vector<uint8_t> stream = SealAll(key, data);
    ASSERT_EQ(stream.size(), SealedSize(size));
    if (size >= 1000) {
      // No 64-byte run of the plaintext appears in the stream.
      const auto run =
          std::search(stream.begin(), stream.end(), data.begin() + 100, data.begin() + 164);
      EXPECT_TRUE(run == stream.end()) << size;
    }
    auto opened = OpenAll(key, size, stream);
    ASSERT_TRUE(opened.ok()) << size << ": " << opened.status();
    EXPECT_TRUE(*opened == data) << size;
  }
}

TEST(ObjectDataCipherTest, SealingInPlaceWorks) {
  const std::string key = *NewTransferKey();
  std::vector<uint8_t> buffer = Pattern(5000);
  buffer.resize(5000 + kSealTagBytes);
  auto sealer = ChunkSealer::Create(key, 5000);
  ASSERT_TRUE(sealer.ok());
  ASSERT_TRUE(sealer->Seal(0, std::span(buffer.data(), 5000), buffer.data()).ok());
  auto opened = OpenAll(key, 5000, buffer);
  ASSERT_TRUE(opened.ok()) << opened.status();
  EXPECT_TRUE(*opened == Pattern(5000));
}

TEST(ObjectDataCipherTest, AWrongKeyFails) {
  const std::vector<uint8_t> data = Pattern(kSealedChunkBytes + 10);
  const std::vector<uint8_t> stream = SealAll(*NewTransferKey(), data);
  auto opened = OpenAll(*NewTransferKey(), data.size(), stream);
  EXPECT_EQ(opened.status(), absl::DataLossError("chunk 0 of 2 failed authentication"));
  // An empty object carries a tag too: a stream not sealed with the key is refused.
  opened = OpenAll(*NewTransferKey(), 0, SealAll(*NewTransferKey(), {}));
  EXPECT_EQ(opened.status().code(), absl::StatusCode::kDataLoss);
}

TEST(ObjectDataCipherTest, AChunkUnderAnotherIndexOrObjectSizeFails) {
  const std::string key = *NewTransferKey();
  const std::vector<uint8_t> data = Pattern(2 * kSealedChunkBytes);
  std::vector<uint8_t> stream = SealAll(key, data);
  // The two chunks swapped: each is the right size for the other place.
  std::vector<uint8_t> swapped(stream.begin() + kSealedChunkBytes + kSealTagBytes, stream.end());
  swapped.insert(swapped.end(), stream.begin(), stream.begin() + kSealedChunkBytes + kSealTagBytes);
  EXPECT_EQ(OpenAll(key, data.size(), swapped).status(),
            absl::DataLossError("chunk 0 of 2 failed authentication"));

  // The first chunk of a 2-chunk object presented as the only chunk of a 1-chunk object.
  std::vector<uint8_t> first(stream.begin(), stream.begin() + kSealedChunkBytes + kSealTagBytes);
  EXPECT_EQ(OpenAll(key, kSealedChunkBytes, first).status(),
            absl::DataLossError("chunk 0 of 1 failed authentication"));

  auto opener = ChunkOpener::Create(key, data.size());
  ASSERT_TRUE(opener.ok());
  EXPECT_THAT(std::string(opener->Open(2, {}, std::span(stream.data(), kSealTagBytes)).message()),
              HasSubstr("chunk 2 of an object of 2097152 bytes, which has 2"));
}

TEST(ObjectDataCipherTest, AChangedByteOrACutTagFails) {
  const std::string key = *NewTransferKey();
  const std::vector<uint8_t> data = Pattern(3000);
  const std::vector<uint8_t> stream = SealAll(key, data);
  for (size_t at : {size_t{0}, size_t{1500}, size_t{2999}, size_t{3000}, size_t{3015}}) {
    std::vector<uint8_t> flipped = stream;
    flipped[at] ^= 0x01;
    EXPECT_EQ(OpenAll(key, data.size(), flipped).status(),
              absl::DataLossError("chunk 0 of 1 failed authentication"))
        << at;
  }
  auto opener = ChunkOpener::Create(key, data.size());
  ASSERT_TRUE(opener.ok());
  std::vector<uint8_t> copy = stream;
  EXPECT_EQ(opener->Open(0, std::span(copy.data(), 3000), std::span(copy.data() + 3000, 15)),
            absl::DataLossError("chunk 0 has a tag of 15 bytes, expected 16"));
  // The tag read one byte early (the chunk cut by a byte) does not open either.
  copy = stream;
  EXPECT_EQ(opener->Open(0, std::span(copy.data(), 2999), std::span(copy.data() + 2999, 16)).code(),
            absl::StatusCode::kDataLoss);
}

TEST(ObjectDataCipherTest, KeysOfTheWrongLengthAreRefused) {
  EXPECT_EQ(ChunkSealer::Create("short", 10).status(),
            absl::InvalidArgumentError("a transfer key of 5 bytes, expected 32"));
  EXPECT_EQ(ChunkOpener::Create(std::string(33, 'k'), 10).status().code(),
            absl::StatusCode::kInvalidArgument);
  auto sealer = ChunkSealer::Create(std::string(32, 'k'), 10);
  ASSERT_TRUE(sealer.ok());
  uint8_t out[64];
  const uint8_t in[9] = {};
  EXPECT_EQ(sealer->Seal(0, std::span(in, 9), out).code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace tessera
