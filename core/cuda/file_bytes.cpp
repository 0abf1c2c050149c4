// FileBytes (see file_bytes.hpp).
#include "core/cuda/file_bytes.hpp"

#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <memory>
#include <utility>

#include "core/base/result.hpp"

namespace sealfs::cuda::detail {

Result<FileBytes> FileBytes::load(int fd) {
  struct stat st {};
  if (::fstat(fd, &st) != 0) return errno_error("fstat");
  if (!S_ISREG(st.st_mode)) return make_error(EINVAL, "not a regular file");
  if (static_cast<std::uint64_t>(st.st_size) > std::numeric_limits<std::size_t>::max())
    return make_error(EFBIG, "file too large to map");
  FileBytes out;
  const auto size = static_cast<std::size_t>(st.st_size);
  if (size == 0) return out;

  if (size <= kReadLimit) {
    out.buffer_ = std::make_unique_for_overwrite<std::byte[]>(size);
    std::size_t got = 0;
    while (got < size) {
      const ssize_t n = ::pread(fd, out.buffer_.get() + got, size - got, static_cast<off_t>(got));
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) return errno_error("pread");
      if (n == 0) break;  // shrank since fstat: scan what is there (it will look truncated)
      got += static_cast<std::size_t>(n);
    }
    out.data_ = out.buffer_.get();
    out.size_ = got;
    return out;
  }

  void* data = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
  if (data == MAP_FAILED) return errno_error("mmap");
  out.mapped_ = true;
  out.data_ = static_cast<const std::byte*>(data);
  out.size_ = size;
  return out;
}

FileBytes::~FileBytes() { reset(); }

FileBytes::FileBytes(FileBytes&& other) noexcept
    : buffer_(std::move(other.buffer_)),
      mapped_(std::exchange(other.mapped_, false)),
      data_(std::exchange(other.data_, nullptr)),
      size_(std::exchange(other.size_, 0)) {}

FileBytes& FileBytes::operator=(FileBytes&& other) noexcept {
  if (this != &other) {
    reset();
    buffer_ = std::move(other.buffer_);
    mapped_ = std::exchange(other.mapped_, false);
    data_ = std::exchange(other.data_, nullptr);
    size_ = std::exchange(other.size_, 0);
  }
  return *this;
}

void FileBytes::reset() {
  if (mapped_ && data_ != nullptr) ::munmap(const_cast<std::byte*>(data_), size_);
  buffer_.reset();
  mapped_ = false;
  data_ = nullptr;
  size_ = 0;
}

}  // namespace sealfs::cuda::detail
