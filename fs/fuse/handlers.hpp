// The request handlers, one file per kind of request (entry_ops.cpp,
// file_ops.cpp, dir_ops.cpp, xattr_ops.cpp); operations.cpp puts them into
// libfuse's table. Each maps a request onto the store and replies.
#pragma once

#include <fuse_lowlevel.h>
#include <sys/stat.h>

#include <cstddef>
#include <cstdint>

namespace sealfs::fuse {

// Names and attributes (entry_ops.cpp).
void op_lookup(fuse_req_t req, fuse_ino_t parent, const char* name);
void op_forget(fuse_req_t req, fuse_ino_t ino, uint64_t nlookup);
void op_forget_multi(fuse_req_t req, size_t count, fuse_forget_data* forgets);
void op_getattr(fuse_req_t req, fuse_ino_t ino, fuse_file_info* fi);
void op_setattr(fuse_req_t req, fuse_ino_t ino, struct stat* attr, int to_set, fuse_file_info* fi);
void op_readlink(fuse_req_t req, fuse_ino_t ino);
void op_mkdir(fuse_req_t req, fuse_ino_t parent, const char* name, mode_t mode);
void op_symlink(fuse_req_t req, const char* target, fuse_ino_t parent, const char* name);
void op_mknod(fuse_req_t req, fuse_ino_t parent, const char* name, mode_t mode, dev_t rdev);
void op_link(fuse_req_t req, fuse_ino_t ino, fuse_ino_t newparent, const char* newname);
void op_unlink(fuse_req_t req, fuse_ino_t parent, const char* name);
void op_rmdir(fuse_req_t req, fuse_ino_t parent, const char* name);
void op_rename(fuse_req_t req, fuse_ino_t parent, const char* name, fuse_ino_t newparent, const char* newname,
               unsigned int flags);

// Files and their handles (file_ops.cpp).
void op_create(fuse_req_t req, fuse_ino_t parent, const char* name, mode_t mode, fuse_file_info* fi);
void op_open(fuse_req_t req, fuse_ino_t ino, fuse_file_info* fi);
void op_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, fuse_file_info* fi);
void op_write_buf(fuse_req_t req, fuse_ino_t ino, fuse_bufvec* in, off_t off, fuse_file_info* fi);
void op_flush(fuse_req_t req, fuse_ino_t ino, fuse_file_info* fi);
void op_release(fuse_req_t req, fuse_ino_t ino, fuse_file_info* fi);
void op_fsync(fuse_req_t req, fuse_ino_t ino, int datasync, fuse_file_info* fi);
void op_fallocate(fuse_req_t req, fuse_ino_t ino, int mode, off_t off, off_t len, fuse_file_info* fi);
void op_lseek(fuse_req_t req, fuse_ino_t ino, off_t off, int whence, fuse_file_info* fi);

// Directories (dir_ops.cpp).
void op_opendir(fuse_req_t req, fuse_ino_t ino, fuse_file_info* fi);
void op_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, fuse_file_info* fi);
void op_readdirplus(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, fuse_file_info* fi);
void op_releasedir(fuse_req_t req, fuse_ino_t ino, fuse_file_info* fi);
void op_fsyncdir(fuse_req_t req, fuse_ino_t ino, int datasync, fuse_file_info* fi);

// Extended attributes and free space (xattr_ops.cpp).
void op_getxattr(fuse_req_t req, fuse_ino_t ino, const char* name, size_t size);
void op_listxattr(fuse_req_t req, fuse_ino_t ino, size_t size);
void op_setxattr(fuse_req_t req, fuse_ino_t ino, const char* name, const char* value, size_t size, int flags);
void op_removexattr(fuse_req_t req, fuse_ino_t ino, const char* name);
void op_statfs(fuse_req_t req, fuse_ino_t ino);

}  // namespace sealfs::fuse
