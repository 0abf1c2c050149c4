#include "core/base/hmac.hpp"

#include <openssl/core_names.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/params.h>

#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string_view>

#include "core/base/digest.hpp"
#include "core/base/result.hpp"

namespace sealfs {
namespace {

struct MacDeleter {
  void operator()(EVP_MAC* mac) const { EVP_MAC_free(mac); }
};
struct MacCtxDeleter {
  void operator()(EVP_MAC_CTX* ctx) const { EVP_MAC_CTX_free(ctx); }
};

// Fetched once: an EVP_MAC is immutable and shared by every thread; each
// call makes its own context.
EVP_MAC* hmac_algorithm() {
  static const std::unique_ptr<EVP_MAC, MacDeleter> mac(EVP_MAC_fetch(nullptr, "HMAC", nullptr));
  return mac.get();
}

}  // namespace

Result<Sha256> hmac_sha256(std::span<const std::uint8_t> key, std::string_view message) {
  EVP_MAC* mac = hmac_algorithm();
  if (mac == nullptr) return make_error(ENOMEM, "HMAC: OpenSSL has no HMAC");
  std::unique_ptr<EVP_MAC_CTX, MacCtxDeleter> ctx(EVP_MAC_CTX_new(mac));
  if (!ctx) return make_error(ENOMEM, "HMAC: no context");
  char digest[] = "SHA256";
  const OSSL_PARAM params[] = {OSSL_PARAM_construct_utf8_string(OSSL_MAC_PARAM_DIGEST, digest, 0),
                               OSSL_PARAM_construct_end()};
  Sha256 out{};
  std::size_t len = 0;
  if (EVP_MAC_init(ctx.get(), key.data(), key.size(), params) != 1 ||
      EVP_MAC_update(ctx.get(), reinterpret_cast<const unsigned char*>(message.data()), message.size()) !=
          1 ||
      EVP_MAC_final(ctx.get(), out.data(), &len, out.size()) != 1 || len != out.size())
    return make_error(ENOMEM, "HMAC: OpenSSL failed");
  return out;
}

bool same_mac(const Sha256& a, const Sha256& b) { return CRYPTO_memcmp(a.data(), b.data(), a.size()) == 0; }

void wipe(std::span<std::uint8_t> secret) { OPENSSL_cleanse(secret.data(), secret.size()); }

}  // namespace sealfs
