// Streaming SHA-256 (OpenSSL EVP). Files are read in large blocks from a
// descriptor; nothing ever holds a whole file in memory.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>

#include "core/base/result.hpp"

namespace sealfs {

using Sha256 = std::array<std::uint8_t, 32>;

std::string to_hex(const Sha256& digest);              // 64 lowercase hex digits
Result<Sha256> sha256_from_hex(std::string_view hex);  // EINVAL unless 64 lowercase hex
bool is_sha256_hex(std::string_view hex);

// Incremental hasher; one per thread of use.
class Sha256Hasher {
 public:
  Sha256Hasher();
  ~Sha256Hasher();
  Sha256Hasher(Sha256Hasher&&) noexcept;
  Sha256Hasher& operator=(Sha256Hasher&&) noexcept;
  void update(std::span<const std::byte> data);
  void update(std::string_view data);
  Sha256 finish();  // the hasher is reset and can be reused afterwards

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

Sha256 sha256_of(std::string_view data);

struct FileDigest {
  Sha256 sha256{};
  std::uint64_t size = 0;  // bytes actually read
};

// Hash the whole file behind fd from offset 0 (pread, so the fd offset is
// untouched). Adds the bytes read to *bytes_hashed when given. EINTR when
// cancel_requested() (core/base/cancel.hpp) says to stop.
Result<FileDigest> sha256_fd(int fd, std::uint64_t* bytes_hashed = nullptr);

}  // namespace sealfs
