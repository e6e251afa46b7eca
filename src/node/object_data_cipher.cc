#include "node/object_data_cipher.h"

#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/rand.h>

#include <algorithm>
#include <array>
#include <climits>
#include <utility>

#include "absl/strings/str_cat.h"

namespace tessera {
namespace {

constexpr size_t kNonceBytes = 12;
constexpr size_t kAadBytes = 4 + 8 + 8;

using ContextPtr = std::unique_ptr<EVP_CIPHER_CTX, internal::CipherContextDeleter>;

absl::Status OpenSslError(const char* what) {
  const unsigned long error = ERR_get_error();
  ERR_clear_error();
  char text[256] = "unknown error";
  if (error != 0) ERR_error_string_n(error, text, sizeof(text));
  return absl::InternalError(absl::StrCat(what, ": ", text));
}

std::array<uint8_t, kNonceBytes> Nonce(uint64_t index) {
  std::array<uint8_t, kNonceBytes> nonce{};
  for (size_t i = 0; i < 8; ++i) nonce[4 + i] = static_cast<uint8_t>(index >> (8 * (7 - i)));
  return nonce;
}

std::array<uint8_t, kAadBytes> Aad(uint64_t object_size, uint64_t index) {
  std::array<uint8_t, kAadBytes> aad{'T', 'S', 'D', 'C'};
  for (size_t i = 0; i < 8; ++i) {
    aad[4 + i] = static_cast<uint8_t>(object_size >> (8 * i));
    aad[12 + i] = static_cast<uint8_t>(index >> (8 * i));
  }
  return aad;
}

absl::StatusOr<ContextPtr> NewContext(std::string_view key, bool encrypt) {
  if (key.size() != kTransferKeyBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("a transfer key of ", key.size(), " bytes, expected ", kTransferKeyBytes));
  }
  ContextPtr context(EVP_CIPHER_CTX_new());
  if (context == nullptr) return OpenSslError("EVP_CIPHER_CTX_new");
  const auto* key_bytes = reinterpret_cast<const unsigned char*>(key.data());
  // The key schedule is made once; each chunk only sets its nonce.
  const int ok =
      encrypt ? EVP_EncryptInit_ex(context.get(), EVP_aes_256_gcm(), nullptr, key_bytes, nullptr)
              : EVP_DecryptInit_ex(context.get(), EVP_aes_256_gcm(), nullptr, key_bytes, nullptr);
  if (ok != 1) return OpenSslError("AES-256-GCM init");
  return context;
}

absl::Status CheckChunk(uint64_t object_size, uint64_t index, size_t size) {
  if (index >= ChunkCount(object_size)) {
    return absl::InvalidArgumentError(absl::StrCat("chunk ", index, " of an object of ",
                                                   object_size, " bytes, which has ",
                                                   ChunkCount(object_size)));
  }
  if (size != ChunkPlaintextBytes(object_size, index)) {
    return absl::InvalidArgumentError(absl::StrCat("chunk ", index, " of ", size,
                                                   " bytes, expected ",
                                                   ChunkPlaintextBytes(object_size, index)));
  }
  return absl::OkStatus();
}

}  // namespace

void internal::CipherContextDeleter::operator()(EVP_CIPHER_CTX* context) const {
  EVP_CIPHER_CTX_free(context);  // also wipes the key schedule
}

uint64_t ChunkCount(uint64_t object_size) {
  if (object_size == 0) return 1;
  return (object_size + kSealedChunkBytes - 1) / kSealedChunkBytes;
}

size_t ChunkPlaintextBytes(uint64_t object_size, uint64_t index) {
  const uint64_t start = index * kSealedChunkBytes;
  if (start >= object_size) return 0;
  return static_cast<size_t>(std::min<uint64_t>(kSealedChunkBytes, object_size - start));
}

uint64_t SealedSize(uint64_t object_size) {
  return object_size + ChunkCount(object_size) * kSealTagBytes;
}

absl::StatusOr<std::string> NewTransferKey() {
  std::string key(kTransferKeyBytes, '\0');
  if (RAND_bytes(reinterpret_cast<unsigned char*>(key.data()), static_cast<int>(key.size())) != 1) {
    return OpenSslError("RAND_bytes");
  }
  return key;
}

absl::StatusOr<ChunkSealer> ChunkSealer::Create(std::string_view key, uint64_t object_size) {
  auto context = NewContext(key, /*encrypt=*/true);
  if (!context.ok()) return context.status();
  return ChunkSealer(*std::move(context), object_size);
}

absl::Status ChunkSealer::Seal(uint64_t index, std::span<const uint8_t> plaintext, uint8_t* out) {
  if (absl::Status s = CheckChunk(object_size_, index, plaintext.size()); !s.ok()) return s;
  static_assert(kSealedChunkBytes <= INT_MAX);
  EVP_CIPHER_CTX* context = context_.get();
  const auto nonce = Nonce(index);
  const auto aad = Aad(object_size_, index);
  int length = 0;
  if (EVP_EncryptInit_ex(context, nullptr, nullptr, nullptr, nonce.data()) != 1 ||
      EVP_EncryptUpdate(context, nullptr, &length, aad.data(), static_cast<int>(aad.size())) != 1) {
    return OpenSslError("AES-256-GCM seal");
  }
  int written = 0;
  if (!plaintext.empty()) {
    if (EVP_EncryptUpdate(context, out, &written, plaintext.data(),
                          static_cast<int>(plaintext.size())) != 1) {
      return OpenSslError("AES-256-GCM seal");
    }
  }
  if (EVP_EncryptFinal_ex(context, out + written, &length) != 1 ||
      EVP_CIPHER_CTX_ctrl(context, EVP_CTRL_GCM_GET_TAG, static_cast<int>(kSealTagBytes),
                          out + plaintext.size()) != 1) {
    return OpenSslError("AES-256-GCM seal");
  }
  return absl::OkStatus();
}

absl::StatusOr<ChunkOpener> ChunkOpener::Create(std::string_view key, uint64_t object_size) {
  auto context = NewContext(key, /*encrypt=*/false);
  if (!context.ok()) return context.status();
  return ChunkOpener(*std::move(context), object_size);
}

absl::Status ChunkOpener::Open(uint64_t index, std::span<uint8_t> data,
                               std::span<const uint8_t> tag) {
  if (absl::Status s = CheckChunk(object_size_, index, data.size()); !s.ok()) {
    return absl::DataLossError(s.message());
  }
  if (tag.size() != kSealTagBytes) {
    return absl::DataLossError(absl::StrCat("chunk ", index, " has a tag of ", tag.size(),
                                            " bytes, expected ", kSealTagBytes));
  }
  EVP_CIPHER_CTX* context = context_.get();
  const auto nonce = Nonce(index);
  const auto aad = Aad(object_size_, index);
  int length = 0;
  if (EVP_DecryptInit_ex(context, nullptr, nullptr, nullptr, nonce.data()) != 1 ||
      EVP_DecryptUpdate(context, nullptr, &length, aad.data(), static_cast<int>(aad.size())) != 1) {
    return OpenSslError("AES-256-GCM open");
  }
  int written = 0;
  if (!data.empty() && EVP_DecryptUpdate(context, data.data(), &written, data.data(),
                                         static_cast<int>(data.size())) != 1) {
    return OpenSslError("AES-256-GCM open");
  }
  // The tag is only read; OpenSSL's signature is not const.
  if (EVP_CIPHER_CTX_ctrl(context, EVP_CTRL_GCM_SET_TAG, static_cast<int>(kSealTagBytes),
                          const_cast<uint8_t*>(tag.data())) != 1) {
    return OpenSslError("AES-256-GCM open");
  }
  if (EVP_DecryptFinal_ex(context, data.data() + written, &length) != 1) {
    ERR_clear_error();
    return absl::DataLossError(
        absl::StrCat("chunk ", index, " of ", ChunkCount(object_size_), " failed authentication"));
  }
  return absl::OkStatus();
}

}  // namespace tessera
