#include "rpc/cluster_identity.h"

#include <openssl/bio.h>
#include <openssl/evp.h>
#include <openssl/kdf.h>
#include <openssl/pem.h>
#include <openssl/rand.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include <array>
#include <ctime>
#include <map>
#include <utility>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"

namespace tessera::rpc {

namespace {

constexpr std::string_view kAuthoritySalt = "tessera cluster authority";
constexpr std::string_view kAuthorityInfo = "ed25519 v1";
constexpr char kAuthorityName[] = "Tessera cluster authority";
constexpr char kProcessName[] = "Tessera process";
// How long a process certificate is valid; it lives only as long as its process.
constexpr long kProcessValiditySeconds = 10L * 365 * 24 * 3600;
// Accepted clock difference between machines of one cluster.
constexpr long kClockSkewSeconds = 24L * 3600;

struct PkeyFree {
  void operator()(EVP_PKEY* p) const { EVP_PKEY_free(p); }
};
struct PkeyCtxFree {
  void operator()(EVP_PKEY_CTX* p) const { EVP_PKEY_CTX_free(p); }
};
struct X509Free {
  void operator()(X509* p) const { X509_free(p); }
};
struct BioFree {
  void operator()(BIO* p) const { BIO_free(p); }
};
using Pkey = std::unique_ptr<EVP_PKEY, PkeyFree>;
using PkeyCtx = std::unique_ptr<EVP_PKEY_CTX, PkeyCtxFree>;
using Cert = std::unique_ptr<X509, X509Free>;
using Bio = std::unique_ptr<BIO, BioFree>;

absl::Status TlsError(const std::string& what) {
  return absl::InternalError(absl::StrCat("cluster identity: ", what, " failed"));
}

absl::StatusOr<std::array<unsigned char, 32>> DeriveAuthoritySeed(std::string_view token) {
  PkeyCtx ctx(EVP_PKEY_CTX_new_id(EVP_PKEY_HKDF, nullptr));
  std::array<unsigned char, 32> seed{};
  size_t length = seed.size();
  if (ctx == nullptr || EVP_PKEY_derive_init(ctx.get()) <= 0 ||
      EVP_PKEY_CTX_set_hkdf_md(ctx.get(), EVP_sha256()) <= 0 ||
      EVP_PKEY_CTX_set1_hkdf_salt(ctx.get(),
                                  reinterpret_cast<const unsigned char*>(kAuthoritySalt.data()),
                                  static_cast<int>(kAuthoritySalt.size())) <= 0 ||
      EVP_PKEY_CTX_set1_hkdf_key(ctx.get(), reinterpret_cast<const unsigned char*>(token.data()),
                                 static_cast<int>(token.size())) <= 0 ||
      EVP_PKEY_CTX_add1_hkdf_info(ctx.get(),
                                  reinterpret_cast<const unsigned char*>(kAuthorityInfo.data()),
                                  static_cast<int>(kAuthorityInfo.size())) <= 0 ||
      EVP_PKEY_derive(ctx.get(), seed.data(), &length) <= 0 || length != seed.size()) {
    return TlsError("deriving the authority key");
  }
  return seed;
}

absl::Status SetName(X509_NAME* name, const char* common_name) {
  if (X509_NAME_add_entry_by_txt(name, "O", MBSTRING_ASC,
                                 reinterpret_cast<const unsigned char*>("Tessera"), -1, -1,
                                 0) != 1 ||
      X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC,
                                 reinterpret_cast<const unsigned char*>(common_name), -1, -1,
                                 0) != 1) {
    return TlsError("naming a certificate");
  }
  return absl::OkStatus();
}

absl::Status AddExtension(X509* cert, X509* issuer, int nid, const char* value) {
  X509V3_CTX ctx;
  X509V3_set_ctx_nodb(&ctx);
  X509V3_set_ctx(&ctx, issuer, cert, nullptr, nullptr, 0);
  X509_EXTENSION* extension = X509V3_EXT_conf_nid(nullptr, &ctx, nid, value);
  if (extension == nullptr) return TlsError(absl::StrCat("extension ", value));
  const int added = X509_add_ext(cert, extension, -1);
  X509_EXTENSION_free(extension);
  if (added != 1) return TlsError(absl::StrCat("extension ", value));
  return absl::OkStatus();
}

// The authority's self-signed certificate: every field fixed, so every process makes the same
// bytes from the same key.
absl::StatusOr<Cert> MakeAuthorityCertificate(EVP_PKEY* key) {
  Cert cert(X509_new());
  if (cert == nullptr || X509_set_version(cert.get(), 2) != 1 ||
      ASN1_INTEGER_set(X509_get_serialNumber(cert.get()), 1) != 1 ||
      ASN1_TIME_set_string(X509_getm_notBefore(cert.get()), "20000101000000Z") != 1 ||
      ASN1_TIME_set_string(X509_getm_notAfter(cert.get()), "99991231235959Z") != 1 ||
      X509_set_pubkey(cert.get(), key) != 1) {
    return TlsError("making the authority certificate");
  }
  if (auto s = SetName(X509_get_subject_name(cert.get()), kAuthorityName); !s.ok()) return s;
  if (X509_set_issuer_name(cert.get(), X509_get_subject_name(cert.get())) != 1) {
    return TlsError("making the authority certificate");
  }
  for (auto [nid, value] : {std::pair{NID_basic_constraints, "critical,CA:TRUE,pathlen:0"},
                            std::pair{NID_key_usage, "critical,keyCertSign"},
                            std::pair{NID_subject_key_identifier, "hash"}}) {
    if (auto s = AddExtension(cert.get(), cert.get(), nid, value); !s.ok()) return s;
  }
  // Ed25519 signs the message itself: no digest.
  if (X509_sign(cert.get(), key, nullptr) <= 0) return TlsError("signing the authority");
  return cert;
}

absl::StatusOr<Cert> MakeProcessCertificate(EVP_PKEY* key, X509* authority,
                                            EVP_PKEY* authority_key) {
  Cert cert(X509_new());
  std::array<unsigned char, 16> serial{};
  if (cert == nullptr || RAND_bytes(serial.data(), serial.size()) != 1) {
    return TlsError("making a process certificate");
  }
  serial[0] &= 0x7f;  // a positive serial
  serial[0] |= 0x40;  // of full length
  BIGNUM* number = BN_bin2bn(serial.data(), serial.size(), nullptr);
  const bool serial_set =
      number != nullptr && BN_to_ASN1_INTEGER(number, X509_get_serialNumber(cert.get()));
  BN_free(number);
  std::time_t now = std::time(nullptr);
  if (!serial_set || X509_set_version(cert.get(), 2) != 1 ||
      X509_time_adj_ex(X509_getm_notBefore(cert.get()), 0, -kClockSkewSeconds, &now) == nullptr ||
      X509_time_adj_ex(X509_getm_notAfter(cert.get()), 0, kProcessValiditySeconds, &now) ==
          nullptr ||
      X509_set_pubkey(cert.get(), key) != 1 ||
      X509_set_issuer_name(cert.get(), X509_get_subject_name(authority)) != 1) {
    return TlsError("making a process certificate");
  }
  if (auto s = SetName(X509_get_subject_name(cert.get()), kProcessName); !s.ok()) return s;
  const std::string names = absl::StrCat("DNS:", kClusterServerName);
  for (auto [nid, value] : {std::pair{NID_basic_constraints, "critical,CA:FALSE"},
                            std::pair{NID_key_usage, "critical,digitalSignature"},
                            std::pair{NID_ext_key_usage, "serverAuth,clientAuth"},
                            std::pair{NID_subject_alt_name, names.c_str()},
                            std::pair{NID_subject_key_identifier, "hash"},
                            std::pair{NID_authority_key_identifier, "keyid:always"}}) {
    if (auto s = AddExtension(cert.get(), authority, nid, value); !s.ok()) return s;
  }
  if (X509_sign(cert.get(), authority_key, nullptr) <= 0) {
    return TlsError("signing a process certificate");
  }
  return cert;
}

absl::StatusOr<std::string> BioText(BIO* bio) {
  char* data = nullptr;
  const long length = BIO_get_mem_data(bio, &data);
  if (length <= 0 || data == nullptr) return TlsError("writing PEM");
  return std::string(data, static_cast<size_t>(length));
}

absl::StatusOr<std::string> CertificatePem(X509* cert) {
  Bio bio(BIO_new(BIO_s_mem()));
  if (bio == nullptr || PEM_write_bio_X509(bio.get(), cert) != 1) return TlsError("writing PEM");
  return BioText(bio.get());
}

absl::StatusOr<std::string> PrivateKeyPem(EVP_PKEY* key) {
  Bio bio(BIO_new(BIO_s_mem()));
  if (bio == nullptr ||
      PEM_write_bio_PrivateKey(bio.get(), key, nullptr, nullptr, 0, nullptr, nullptr) != 1) {
    return TlsError("writing PEM");
  }
  return BioText(bio.get());
}

absl::StatusOr<std::string> Fingerprint(X509* cert) {
  std::array<unsigned char, EVP_MAX_MD_SIZE> digest{};
  unsigned int length = 0;
  if (X509_digest(cert, EVP_sha256(), digest.data(), &length) != 1) {
    return TlsError("fingerprinting the authority");
  }
  return absl::StrCat("sha256:", absl::BytesToHexString(absl::string_view(
                                     reinterpret_cast<const char*>(digest.data()), length)));
}

}  // namespace

absl::StatusOr<std::unique_ptr<ClusterIdentity>> ClusterIdentity::Derive(std::string_view token) {
  if (token.empty()) return absl::InvalidArgumentError("empty cluster token");
  auto seed = DeriveAuthoritySeed(token);
  if (!seed.ok()) return seed.status();
  Pkey authority_key(
      EVP_PKEY_new_raw_private_key(EVP_PKEY_ED25519, nullptr, seed->data(), seed->size()));
  OPENSSL_cleanse(seed->data(), seed->size());
  if (authority_key == nullptr) return TlsError("making the authority key");
  auto authority = MakeAuthorityCertificate(authority_key.get());
  if (!authority.ok()) return authority.status();

  Pkey key(EVP_PKEY_Q_keygen(nullptr, nullptr, "ED25519"));
  if (key == nullptr) return TlsError("making a process key");
  auto cert = MakeProcessCertificate(key.get(), authority->get(), authority_key.get());
  if (!cert.ok()) return cert.status();

  std::unique_ptr<ClusterIdentity> identity(new ClusterIdentity());
  auto authority_pem = CertificatePem(authority->get());
  auto certificate_pem = CertificatePem(cert->get());
  auto private_key_pem = PrivateKeyPem(key.get());
  auto fingerprint = Fingerprint(authority->get());
  for (const absl::Status& status : {authority_pem.status(), certificate_pem.status(),
                                     private_key_pem.status(), fingerprint.status()}) {
    if (!status.ok()) return status;
  }
  identity->authority_pem_ = *std::move(authority_pem);
  identity->certificate_pem_ = *std::move(certificate_pem);
  identity->private_key_pem_ = *std::move(private_key_pem);
  identity->authority_fingerprint_ = *std::move(fingerprint);
  identity->channel_credentials_ = identity->MakeChannelCredentials();
  return identity;
}

absl::StatusOr<std::shared_ptr<const ClusterIdentity>> ClusterIdentity::ForToken(
    std::string_view token) {
  static absl::Mutex mu(absl::kConstInit);
  // Keyed by the token: a process knows a handful (usually one) for its whole life.
  static auto* identities =
      new std::map<std::string, std::shared_ptr<const ClusterIdentity>, std::less<>>();
  absl::MutexLock lock(&mu);
  auto it = identities->find(token);
  if (it != identities->end()) return it->second;
  auto made = Derive(token);
  if (!made.ok()) return made.status();
  std::shared_ptr<const ClusterIdentity> identity = *std::move(made);
  identities->emplace(std::string(token), identity);
  return identity;
}

std::shared_ptr<grpc::ChannelCredentials> ClusterIdentity::MakeChannelCredentials() const {
  grpc::SslCredentialsOptions options;
  options.pem_root_certs = authority_pem_;
  options.pem_private_key = private_key_pem_;
  options.pem_cert_chain = certificate_pem_;
  return grpc::SslCredentials(options);
}

std::shared_ptr<grpc::ServerCredentials> ClusterIdentity::ServerCredentials() const {
  grpc::SslServerCredentialsOptions options(
      GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY);
  options.pem_root_certs = authority_pem_;
  options.pem_key_cert_pairs.push_back({private_key_pem_, certificate_pem_});
  return grpc::SslServerCredentials(options);
}

}  // namespace tessera::rpc
