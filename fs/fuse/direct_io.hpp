// O_DIRECT through the mount. The kernel already keeps a direct open's I/O
// out of M's page cache (its own direct path sends every read and write to
// the daemon), so the open is answered without FOPEN_DIRECT_IO, which would
// also refuse the file's mmap. Toward B the caller's O_DIRECT is kept, as
// libfuse's passthrough_hp does and as the kernel's FUSE passthrough does
// with its own backing file: B's page cache is bypassed as the caller asked,
// and B judges each direct write's offset and length as it would the
// caller's own (virtiofsd drops the flag instead; an unaligned direct write
// then succeeded on M where B refuses it). The one thing a direct request
// cannot pass on is its caller's buffer address: the kernel copies the bytes
// into the request, whose payload sits at no particular alignment, so the
// data path stages them in page-aligned memory (direct_scratch).
#pragma once

#include <fcntl.h>
#include <fuse_lowlevel.h>
#include <unistd.h>

#include <cstddef>
#include <memory>
#include <vector>

namespace sealfs::fuse {

// size bytes of this thread's scratch memory, starting on a page boundary
// (every logical block size a device reports divides a page); valid until
// the thread's next call.
inline char* direct_scratch(std::size_t size) {
  static const auto page = static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));
  thread_local std::vector<char> bytes;
  if (bytes.size() < size + page) bytes.resize(size + page);
  void* at = bytes.data();
  std::size_t space = bytes.size();
  return static_cast<char*>(std::align(page, size, at, space));
}

// Whether a WRITE carries its caller's direct I/O: the kernel sends the
// file's current flags (a caller may drop O_DIRECT with F_SETFL), and a
// page written back from a mapping is never direct.
inline bool direct_write(const fuse_file_info* fi) {
  return fi != nullptr && (fi->flags & O_DIRECT) != 0 && fi->writepage == 0;
}

}  // namespace sealfs::fuse
