// A read-only private mapping of a whole regular file, unmapped on scope exit.
// The CUDA scanners read only the pages they touch (headers, magic scans).
#pragma once

#include <cstddef>
#include <span>

#include "core/result.hpp"

namespace sealfs {

class MappedFile {
 public:
  // fd: a regular file open for reading (the fd is not kept). EINVAL for
  // anything but a regular file; an empty file maps to an empty view.
  static Result<MappedFile> map(int fd);
  ~MappedFile();
  MappedFile(MappedFile&& other) noexcept;
  MappedFile& operator=(MappedFile&& other) noexcept;
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  std::span<const std::byte> bytes() const { return {data_, size_}; }

 private:
  MappedFile(const std::byte* data, std::size_t size) : data_(data), size_(size) {}
  void reset();
  const std::byte* data_ = nullptr;
  std::size_t size_ = 0;
};

}  // namespace sealfs
