// The whole content of a regular file as one read-only byte view, for the
// CUDA scanners. Files up to kReadLimit are read into memory: a writer that
// truncates the file meanwhile cannot hurt us. Larger files are mapped
// (MAP_PRIVATE, PROT_READ) so that only the pages the scan touches are read,
// which keeps a 100 MB library well under 50 ms; a concurrent truncation of
// such a file would raise SIGBUS, which publish rules out in practice (the
// file has been fsync'ed and its writer has closed it).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>

#include "core/base/result.hpp"

namespace sealfs::cuda::detail {

class FileBytes {
 public:
  static constexpr std::uint64_t kReadLimit = 64ull << 20;

  // fd: a regular file open for reading (not kept). EINVAL for anything but
  // a regular file; EFBIG beyond the address space; errno of read/mmap.
  static Result<FileBytes> load(int fd);
  ~FileBytes();
  FileBytes(FileBytes&& other) noexcept;
  FileBytes& operator=(FileBytes&& other) noexcept;
  FileBytes(const FileBytes&) = delete;
  FileBytes& operator=(const FileBytes&) = delete;

  std::span<const std::byte> bytes() const { return {data_, size_}; }

 private:
  FileBytes() = default;
  void reset();
  std::unique_ptr<std::byte[]> buffer_;  // small files: their content
  bool mapped_ = false;                  // large files: data_ is an mmap
  const std::byte* data_ = nullptr;
  std::size_t size_ = 0;
};

}  // namespace sealfs::cuda::detail
