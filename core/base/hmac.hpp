// HMAC-SHA-256 (OpenSSL 3 EVP_MAC "HMAC" with digest SHA256) of a message in
// memory, and a comparison of two MACs that takes the same time wherever
// they differ.
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <string_view>

#include "core/base/digest.hpp"
#include "core/base/result.hpp"

namespace sealfs {

using HmacKey = std::array<std::uint8_t, 32>;

// ENOMEM when OpenSSL cannot set up the MAC (no provider, no memory).
Result<Sha256> hmac_sha256(std::span<const std::uint8_t> key, std::string_view message);
bool same_mac(const Sha256& a, const Sha256& b);
// Wipes secret bytes (OPENSSL_cleanse: not optimised away).
void wipe(std::span<std::uint8_t> secret);

}  // namespace sealfs
