// MappedFile (see cuda_mapped_file.hpp).
#include "core/cuda_mapped_file.hpp"

#include <sys/mman.h>
#include <sys/stat.h>

#include <cerrno>
#include <cstdint>
#include <limits>
#include <utility>

namespace sealfs {

Result<MappedFile> MappedFile::map(int fd) {
  struct stat st {};
  if (::fstat(fd, &st) != 0) return errno_error("fstat");
  if (!S_ISREG(st.st_mode)) return make_error(EINVAL, "not a regular file");
  if (st.st_size == 0) return MappedFile(nullptr, 0);
  if (static_cast<std::uint64_t>(st.st_size) > std::numeric_limits<std::size_t>::max())
    return make_error(EFBIG, "file too large to map");
  const auto size = static_cast<std::size_t>(st.st_size);
  // MAP_PRIVATE + PROT_READ: a writer changing the file meanwhile can make the
  // scan see mixed bytes, which at worst rejects; it cannot make us crash
  // except by truncating under us (SIGBUS), which publish excludes (the file
  // was fsync'ed and is no longer being written when validators run).
  void* data = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
  if (data == MAP_FAILED) return errno_error("mmap");
  return MappedFile(static_cast<const std::byte*>(data), size);
}

MappedFile::~MappedFile() { reset(); }

MappedFile::MappedFile(MappedFile&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)), size_(std::exchange(other.size_, 0)) {}

MappedFile& MappedFile::operator=(MappedFile&& other) noexcept {
  if (this != &other) {
    reset();
    data_ = std::exchange(other.data_, nullptr);
    size_ = std::exchange(other.size_, 0);
  }
  return *this;
}

void MappedFile::reset() {
  if (data_ != nullptr) ::munmap(const_cast<std::byte*>(data_), size_);
  data_ = nullptr;
  size_ = 0;
}

}  // namespace sealfs
