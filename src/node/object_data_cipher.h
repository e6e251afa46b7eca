// The seal on the agents' object data connections (object_data_server.h, object_transfer.h):
// AES-256-GCM under a key made fresh for each offer and handed to the puller over the
// authenticated OfferObject call, so the bytes on the data port are unreadable to anyone on the
// path, and a listener that is not the holder (one that squats a dead agent's port, or knows the
// ticket but not the key) cannot make the puller accept a single byte.
//
// An object of n bytes travels as ChunkCount(n) sealed chunks, in order: chunk i is the next
// ChunkPlaintextBytes(n, i) bytes (kSealedChunkBytes, the last one less; an empty object is one
// empty chunk, so every stream carries at least one tag) encrypted, then its kSealTagBytes tag.
// The nonce is the chunk index (unique because the key is used for one offer only); the
// authenticated data is "TSDC", n and i, so a chunk cannot be moved, dropped or replayed into
// another object. SealedSize(n) bytes in all.
//
// Cost: one pass of AES-GCM over the bytes on each side (AES-NI and carry-less multiply where
// the CPU has them), no allocation per chunk. Threading: a ChunkSealer or ChunkOpener is used by
// one thread at a time; the free functions are thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

typedef struct evp_cipher_ctx_st EVP_CIPHER_CTX;

namespace tessera {

inline constexpr size_t kTransferKeyBytes = 32;
inline constexpr size_t kSealTagBytes = 16;
// Plaintext bytes of every chunk but the last.
inline constexpr size_t kSealedChunkBytes = size_t{1} << 20;

// Chunks of an object of `object_size` bytes (at least 1).
uint64_t ChunkCount(uint64_t object_size);
// Plaintext bytes of chunk `index` (< ChunkCount) of such an object.
size_t ChunkPlaintextBytes(uint64_t object_size, uint64_t index);
// Bytes on the wire for such an object: its bytes and a tag per chunk.
uint64_t SealedSize(uint64_t object_size);

// kTransferKeyBytes from OpenSSL's RAND_bytes. Internal when the generator fails.
absl::StatusOr<std::string> NewTransferKey();

namespace internal {
struct CipherContextDeleter {
  void operator()(EVP_CIPHER_CTX* context) const;
};
}  // namespace internal

// The holder's side: seals the chunks of one object under one offer's key.
class ChunkSealer {
 public:
  // InvalidArgument when `key` is not kTransferKeyBytes; Internal when OpenSSL fails.
  static absl::StatusOr<ChunkSealer> Create(std::string_view key, uint64_t object_size);

  // Encrypts chunk `index` from `plaintext` (exactly ChunkPlaintextBytes(object_size, index)
  // bytes) into `out`, followed by its tag: `out` holds plaintext.size() + kSealTagBytes bytes
  // and may start where `plaintext` does. InvalidArgument for a wrong index or size.
  absl::Status Seal(uint64_t index, std::span<const uint8_t> plaintext, uint8_t* out);

 private:
  ChunkSealer(std::unique_ptr<EVP_CIPHER_CTX, internal::CipherContextDeleter> context,
              uint64_t object_size)
      : context_(std::move(context)), object_size_(object_size) {}
  std::unique_ptr<EVP_CIPHER_CTX, internal::CipherContextDeleter> context_;
  uint64_t object_size_;
};

// The puller's side: opens the chunks of one object in place.
class ChunkOpener {
 public:
  // InvalidArgument when `key` is not kTransferKeyBytes; Internal when OpenSSL fails.
  static absl::StatusOr<ChunkOpener> Create(std::string_view key, uint64_t object_size);

  // Decrypts chunk `index` in place (`data` is its ciphertext, exactly ChunkPlaintextBytes
  // bytes) and checks `tag`. DataLoss, naming the chunk, when anything differs from what the
  // key's holder sealed (another key, index, object size, a changed byte, a tag that is not
  // kSealTagBytes): `data` then holds garbage, which the caller must discard.
  absl::Status Open(uint64_t index, std::span<uint8_t> data, std::span<const uint8_t> tag);

 private:
  ChunkOpener(std::unique_ptr<EVP_CIPHER_CTX, internal::CipherContextDeleter> context,
              uint64_t object_size)
      : context_(std::move(context)), object_size_(object_size) {}
  std::unique_ptr<EVP_CIPHER_CTX, internal::CipherContextDeleter> context_;
  uint64_t object_size_;
};

}  // namespace tessera
