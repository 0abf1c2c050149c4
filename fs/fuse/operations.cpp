// The FUSE low-level operations table: the handlers (handlers.hpp, one file
// per kind of request) and the connection's settings at init.
//
// Locks: no lock operations are implemented, so the kernel handles POSIX and
// flock locks itself. They work between processes on this host (as on any
// local filesystem) but are not seen by other hosts sharing B.
#include <linux/capability.h>
#include <sys/syscall.h>
#include <syslog.h>
#include <unistd.h>

#include <atomic>

#include "fs/fuse/filesystem.hpp"
#include "fs/fuse/handlers.hpp"
#include "fs/fuse/passthrough.hpp"
#include "fs/fuse/writer_tasks.hpp"

namespace sealfs::fuse {
namespace {

// CAP_SYS_ADMIN in the daemon's effective set: the kernel's backing-file
// ioctl (FUSE passthrough) demands it (in the initial user namespace, which
// only the ioctl itself can tell: passthrough.hpp turns off at its EPERM).
bool has_sys_admin() {
  __user_cap_header_struct header{_LINUX_CAPABILITY_VERSION_3, 0};
  __user_cap_data_struct data[_LINUX_CAPABILITY_U32S_3]{};
  if (::syscall(SYS_capget, &header, data) != 0) return false;
  return (data[CAP_TO_INDEX(CAP_SYS_ADMIN)].effective & CAP_TO_MASK(CAP_SYS_ADMIN)) != 0;
}

// Issue 25: sealed files open in passthrough mode where the library, the
// kernel and the daemon's privileges allow, on a connection that keeps OPEN
// (passthrough is an OPEN reply). Logged once, either way.
#if SEALFS_HAVE_PASSTHROUGH
constexpr unsigned kPassthroughCap = FUSE_CAP_PASSTHROUGH;
#else
constexpr unsigned kPassthroughCap = 0;
#endif

void ask_passthrough(Filesystem& fs, fuse_conn_info* conn) {
  const char* off = nullptr;
  if (!PassthroughOpens::kBuilt)
    off = "this sealfs is built against a libfuse without it (3.14; the passthrough build uses 3.17)";
  else if (fs.passthrough_off != nullptr)
    off = fs.passthrough_off;
  else if (fs.no_open)
    off = "the mount answers no OPEN (-o no_open, ro)";
  else if ((conn->capable & kPassthroughCap) == 0)
    off = "the kernel does not offer it (CONFIG_FUSE_PASSTHROUGH, Linux 6.9 or later)";
  else if (!has_sys_admin())
    off = "the daemon lacks CAP_SYS_ADMIN";
  if (off != nullptr) {
    syslog(LOG_INFO, "sealfs: FUSE passthrough off: %s", off);
    return;
  }
  conn->want |= kPassthroughCap;
  fs.passthrough.grant();
  syslog(LOG_INFO,
         "sealfs: FUSE passthrough on: sealed files verified at open are read by the kernel from B");
}

void op_init(void* userdata, fuse_conn_info* conn) {
  auto* fs = static_cast<Filesystem*>(userdata);
  // Without OPEN (fs/README.md) the kernel must send O_TRUNC's truncation as
  // a SETATTR: with atomic_o_trunc it would leave it to the OPEN it skips.
  if (fs != nullptr && !(conn->capable & FUSE_CAP_NO_OPEN_SUPPORT)) fs->no_open = false;
  if (fs != nullptr && !(conn->capable & FUSE_CAP_NO_OPENDIR_SUPPORT)) fs->no_opendir = false;
  if (fs != nullptr && fs->no_open)
    conn->want &= ~FUSE_CAP_ATOMIC_O_TRUNC;
  else if (conn->capable & FUSE_CAP_ATOMIC_O_TRUNC)
    conn->want |= FUSE_CAP_ATOMIC_O_TRUNC;  // a truncating open is one store call
  // Reads of backing files may be spliced instead of copied.
  if (conn->capable & FUSE_CAP_SPLICE_WRITE) conn->want |= FUSE_CAP_SPLICE_WRITE;
  // The user's connection options (-o max_write=, no_splice_write, …) may
  // change the defaults above, not the rules below.
  if (fs != nullptr) {
    fs->mount_id.store(fuse_mount_id_of(fs->mountpoint), std::memory_order_relaxed);
    fs->set_mount_device(fuse_mount_device_of(fs->mountpoint));
    fs->proc_is_ours = proc_is_own_namespace();
    if (!fs->proc_is_ours)
      syslog(LOG_WARNING,
             "sealfs: /proc is not this daemon's pid namespace's (mount one, or share the writers' pid "
             "namespace): no writer can be seen, so in-place writes outside volatile areas are refused (R4)");
    if (fs->conn_opts) fuse_apply_conn_info_opts(fs->conn_opts.get(), conn);
    if (fs->max_read != 0) conn->max_read = fs->max_read;  // libfuse checks it equals -o max_read
  }
  // Lookups and listings of one directory run in parallel: a slow hash for
  // one name never holds up lookups of the others (R2).
  if (conn->capable & FUSE_CAP_PARALLEL_DIROPS) conn->want |= FUSE_CAP_PARALLEL_DIROPS;
  // No NFS export: inode ids only live as long as the kernel's lookup counts.
  conn->want &= ~FUSE_CAP_EXPORT_SUPPORT;
  // Writes must reach the backing file before FLUSH/RELEASE (R4 seals at
  // last close): no writeback cache.
  conn->want &= ~FUSE_CAP_WRITEBACK_CACHE;
  conn->want &= ~FUSE_CAP_AUTO_INVAL_DATA;
  // Passthrough needs the writeback cache off too (the kernel refuses both).
  if (fs != nullptr) ask_passthrough(*fs, conn);
}

fuse_lowlevel_ops make_operations() {
  fuse_lowlevel_ops ops{};
  ops.init = op_init;
  ops.lookup = op_lookup;
  ops.forget = op_forget;
  ops.forget_multi = op_forget_multi;
  ops.getattr = op_getattr;
  ops.setattr = op_setattr;
  ops.readlink = op_readlink;
  ops.mknod = op_mknod;
  ops.mkdir = op_mkdir;
  ops.unlink = op_unlink;
  ops.rmdir = op_rmdir;
  ops.symlink = op_symlink;
  ops.rename = op_rename;
  ops.link = op_link;
  ops.open = op_open;
  ops.read = op_read;
  ops.write_buf = op_write_buf;
  ops.flush = op_flush;
  ops.release = op_release;
  ops.fsync = op_fsync;
  ops.opendir = op_opendir;
  ops.readdir = op_readdir;
  ops.readdirplus = op_readdirplus;
  ops.releasedir = op_releasedir;
  ops.fsyncdir = op_fsyncdir;
  ops.statfs = op_statfs;
  ops.setxattr = op_setxattr;
  ops.getxattr = op_getxattr;
  ops.listxattr = op_listxattr;
  ops.removexattr = op_removexattr;
  ops.create = op_create;
  ops.fallocate = op_fallocate;
  ops.lseek = op_lseek;
  return ops;
}

}  // namespace

const fuse_lowlevel_ops& operations() {
  static const fuse_lowlevel_ops ops = make_operations();
  return ops;
}

}  // namespace sealfs::fuse
