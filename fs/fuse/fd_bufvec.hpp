// A libfuse buffer vector of one piece: size bytes of fd at off, which
// libfuse reads or splices with pread/pwrite, or bytes in memory
// (FUSE_BUFVEC_INIT without the C99 compound literal).
#pragma once

#include <fuse_lowlevel.h>
#include <sys/types.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>

#include "core/base/result.hpp"

namespace sealfs::fuse {

inline fuse_bufvec fd_bufvec(std::size_t size, int fd, off_t off) {
  fuse_bufvec v{};
  v.count = 1;
  v.buf[0].size = size;
  v.buf[0].flags = static_cast<fuse_buf_flags>(FUSE_BUF_IS_FD | FUSE_BUF_FD_SEEK);
  v.buf[0].fd = fd;
  v.buf[0].pos = off;
  return v;
}

// The same for size bytes in memory at data.
inline fuse_bufvec mem_bufvec(std::size_t size, void* data) {
  fuse_bufvec v{};
  v.count = 1;
  v.buf[0].size = size;
  v.buf[0].mem = data;
  v.buf[0].fd = -1;
  return v;
}

// pread of [off, off + size) into buf, short only at the end of the file:
// what a READ checked after the fact and a page push read into memory.
inline Result<std::size_t> pread_up_to(int fd, char* buf, std::size_t size, off_t off) {
  std::size_t done = 0;
  while (done < size) {
    const ssize_t n = ::pread(fd, buf + done, size - done, off + static_cast<off_t>(done));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return errno_error("read");
    if (n == 0) break;
    done += static_cast<std::size_t>(n);
  }
  return done;
}

}  // namespace sealfs::fuse
