#include "core/base/digest.hpp"

#include <openssl/evp.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <new>
#include <span>
#include <string>
#include <string_view>

#include "core/base/cancel.hpp"
#include "core/base/result.hpp"

namespace sealfs {

namespace {

constexpr char kHexDigits[] = "0123456789abcdef";

// Block size for sha256_fd. 1 MiB keeps the syscall count low (one pread per
// MiB) while the buffer still sits in L2/L3, so the copy out of the page cache
// costs little next to the hash itself. pread, not mmap: a file truncated
// behind our back must give a short read, not SIGBUS in the daemon.
constexpr std::size_t kReadBlock = 1u << 20;
// Small files get a small buffer: most cache entries hold a few files of a
// few KiB, and a fresh 1 MiB buffer per file would cost more than the hash.
constexpr std::size_t kMinReadBlock = 64u << 10;

std::size_t buffer_size_for(const struct stat& st) {
  if (!S_ISREG(st.st_mode) || st.st_size < 0) return kReadBlock;
  // One byte more than the size, so the read that sees EOF needs no second
  // buffer's worth of work; a file that grows meanwhile is still read whole.
  auto want = static_cast<std::uint64_t>(st.st_size) + 1;
  return static_cast<std::size_t>(std::clamp<std::uint64_t>(want, kMinReadBlock, kReadBlock));
}

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  return -1;  // uppercase is refused on purpose: one spelling per digest
}

struct EvpCtxDeleter {
  void operator()(EVP_MD_CTX* ctx) const { EVP_MD_CTX_free(ctx); }
};
using EvpCtxPtr = std::unique_ptr<EVP_MD_CTX, EvpCtxDeleter>;

}  // namespace

std::string to_hex(const Sha256& digest) {
  std::string out;
  out.reserve(digest.size() * 2);
  for (std::uint8_t b : digest) {
    out.push_back(kHexDigits[b >> 4]);
    out.push_back(kHexDigits[b & 0x0f]);
  }
  return out;
}

bool is_sha256_hex(std::string_view hex) {
  if (hex.size() != 64) return false;
  for (char c : hex)
    if (hex_value(c) < 0) return false;
  return true;
}

Result<Sha256> sha256_from_hex(std::string_view hex) {
  if (!is_sha256_hex(hex)) return make_error(EINVAL, "not a SHA-256 digest (64 lowercase hex digits)");
  Sha256 out{};
  for (std::size_t i = 0; i < out.size(); ++i)
    out[i] = static_cast<std::uint8_t>(hex_value(hex[2 * i]) << 4 | hex_value(hex[2 * i + 1]));
  return out;
}

// OpenSSL's EVP interface picks the fastest implementation for this CPU
// (SHA-NI, AVX2, …). A context that OpenSSL cannot allocate or initialise is
// a broken process state, not a per-file error: report it as bad_alloc, the
// one exception the FUSE boundary already catches.
struct Sha256Hasher::Impl {
  EvpCtxPtr ctx{EVP_MD_CTX_new()};

  Impl() {
    if (!ctx || EVP_DigestInit_ex(ctx.get(), EVP_sha256(), nullptr) != 1) throw std::bad_alloc();
  }
};

Sha256Hasher::Sha256Hasher() : impl_(std::make_unique<Impl>()) {}
Sha256Hasher::~Sha256Hasher() = default;
Sha256Hasher::Sha256Hasher(Sha256Hasher&&) noexcept = default;
Sha256Hasher& Sha256Hasher::operator=(Sha256Hasher&&) noexcept = default;

void Sha256Hasher::update(std::span<const std::byte> data) {
  // EVP_DigestUpdate only fails on a context that was never initialised,
  // which the constructor and finish() rule out.
  if (!data.empty()) EVP_DigestUpdate(impl_->ctx.get(), data.data(), data.size());
}

void Sha256Hasher::update(std::string_view data) {
  update(std::as_bytes(std::span(data.data(), data.size())));
}

Sha256 Sha256Hasher::finish() {
  Sha256 out{};
  unsigned int len = 0;
  EVP_DigestFinal_ex(impl_->ctx.get(), out.data(), &len);
  // Re-arm for reuse; the digest type is kept from the previous init.
  if (EVP_DigestInit_ex(impl_->ctx.get(), nullptr, nullptr) != 1) throw std::bad_alloc();
  return out;
}

Sha256 sha256_of(std::string_view data) {
  Sha256Hasher h;
  h.update(data);
  return h.finish();
}

Result<FileDigest> sha256_fd(int fd, std::uint64_t* bytes_hashed) {
  struct stat st {};
  if (::fstat(fd, &st) != 0) return errno_error("fstat before hashing");
  // Uninitialised on purpose: every byte hashed was first written by pread.
  const std::size_t buf_size = buffer_size_for(st);
  auto buf = std::make_unique_for_overwrite<std::byte[]>(buf_size);
  Sha256Hasher hasher;
  FileDigest out;
  for (;;) {
    ssize_t n = ::pread(fd, buf.get(), buf_size, static_cast<off_t>(out.size));
    if (n < 0) {
      if (errno == EINTR) continue;
      return errno_error("pread while hashing");
    }
    if (n == 0) break;
    // A caller that gave up, or a daemon shutting down, abandons the hash.
    if (cancel_requested()) return make_error(EINTR, "hash abandoned: its caller gave up");
    hasher.update(std::span(buf.get(), static_cast<std::size_t>(n)));
    out.size += static_cast<std::uint64_t>(n);
    // Counted as we go so a failure halfway still shows the work done.
    if (bytes_hashed != nullptr) *bytes_hashed += static_cast<std::uint64_t>(n);
  }
  out.sha256 = hasher.finish();
  return out;
}

}  // namespace sealfs
