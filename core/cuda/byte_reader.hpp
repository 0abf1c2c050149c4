// Bounds-checked little-endian reads from untrusted bytes (a mapped file).
// Every parser of device images reads through these, so no header field can
// make a read leave the buffer.
#pragma once

#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <optional>
#include <span>
#include <type_traits>

namespace sealfs::cuda::detail {

using Bytes = std::span<const std::byte>;

// ELF, fatbin and cubin headers on every platform CUDA supports are
// little-endian; reading them with memcpy is only right on such a host.
static_assert(std::endian::native == std::endian::little,
              "sealfs's CUDA parsers assume a little-endian host");

// True when [offset, offset + length) lies inside a buffer of `size` bytes,
// without overflowing.
constexpr bool in_bounds(std::uint64_t size, std::uint64_t offset, std::uint64_t length) {
  return offset <= size && length <= size - offset;
}

template <class T>
std::optional<T> read_at(Bytes bytes, std::uint64_t offset) {
  static_assert(std::is_trivially_copyable_v<T>);
  if (!in_bounds(bytes.size(), offset, sizeof(T))) return std::nullopt;
  T value;
  std::memcpy(&value, bytes.data() + offset, sizeof(T));
  return value;
}

inline bool starts_with(Bytes bytes, std::span<const unsigned char> prefix) {
  return bytes.size() >= prefix.size() && std::memcmp(bytes.data(), prefix.data(), prefix.size()) == 0;
}

}  // namespace sealfs::cuda::detail
