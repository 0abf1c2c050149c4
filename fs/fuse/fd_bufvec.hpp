// A libfuse buffer vector of one piece: size bytes of fd at off, which
// libfuse reads or splices with pread/pwrite, or bytes in memory
// (FUSE_BUFVEC_INIT without the C99 compound literal).
#pragma once

#include <fuse_lowlevel.h>
#include <sys/types.h>

#include <cstddef>

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

}  // namespace sealfs::fuse
