// The cheapest FUSE passthrough this kernel and libfuse allow, as a floor
// for cache_bench: one O_PATH fd per inode, day-long entry and attribute
// timeouts, keep_cache and noflush on every open, reads spliced from the
// backing file, no checks of any kind, no fsync, and only the writing
// operations TileLang's save uses (mkdir, create, write, rename). Whatever a
// load or a save costs on it is the price of FUSE itself, which no verifying
// layer can go below.
//
//   fuse_floor [--no-open] BACKING MOUNTPOINT     (foreground; fusermount3 -u)
//
// --no-open answers the first OPEN with ENOSYS, which makes the kernel stop
// sending OPEN and RELEASE on the whole connection (FUSE's "no_open"): the
// floor of a layer that never sees opens, which sealfs cannot be (R4 tracks
// write opens; reads of sealed files are checked at open).
#include <dirent.h>
#include <fcntl.h>
#include <fuse_lowlevel.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "core/base/unique_fd.hpp"
#include "fs/fuse/fd_bufvec.hpp"

namespace {

using sealfs::UniqueFd;

constexpr double kTimeout = 86400;

struct Node {
  UniqueFd fd;  // O_PATH
  std::uint64_t lookups = 0;
};

struct Floor {
  UniqueFd root;
  bool no_open = false;
  std::mutex mu;
  std::map<std::pair<dev_t, ino_t>, std::unique_ptr<Node>> nodes;
};

Floor& floor_of(fuse_req_t req) { return *static_cast<Floor*>(fuse_req_userdata(req)); }

int fd_of(Floor& f, fuse_ino_t ino) {
  return ino == FUSE_ROOT_ID ? f.root.get() : reinterpret_cast<Node*>(ino)->fd.get();
}

std::string proc_path(int fd) { return "/proc/self/fd/" + std::to_string(fd); }

// The node of parent/name (looked up, or just made), described in e.
int entry_of(Floor& f, int parent_fd, const char* name, fuse_entry_param& e) {
  UniqueFd fd(::openat(parent_fd, name, O_PATH | O_NOFOLLOW | O_CLOEXEC));
  if (!fd) return errno;
  e = fuse_entry_param{};
  if (::fstatat(fd.get(), "", &e.attr, AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW) != 0) return errno;
  Node* node = nullptr;
  {
    std::lock_guard lock(f.mu);
    auto& slot = f.nodes[{e.attr.st_dev, e.attr.st_ino}];
    if (!slot) {
      slot = std::make_unique<Node>();
      slot->fd = std::move(fd);
    }
    ++slot->lookups;
    node = slot.get();
  }
  e.ino = reinterpret_cast<fuse_ino_t>(node);
  e.attr_timeout = kTimeout;
  e.entry_timeout = kTimeout;
  return 0;
}

void ll_lookup(fuse_req_t req, fuse_ino_t parent, const char* name) {
  Floor& f = floor_of(req);
  fuse_entry_param e{};
  if (int err = entry_of(f, fd_of(f, parent), name, e)) return (void)fuse_reply_err(req, err);
  fuse_reply_entry(req, &e);
}

// ---- writing: what the TileLang save needs (mkdir, create, write, rename) ----

void ll_mkdir(fuse_req_t req, fuse_ino_t parent, const char* name, mode_t mode) {
  Floor& f = floor_of(req);
  if (::mkdirat(fd_of(f, parent), name, mode) != 0) return (void)fuse_reply_err(req, errno);
  fuse_entry_param e{};
  if (int err = entry_of(f, fd_of(f, parent), name, e)) return (void)fuse_reply_err(req, err);
  fuse_reply_entry(req, &e);
}

void ll_create(fuse_req_t req, fuse_ino_t parent, const char* name, mode_t mode, fuse_file_info* fi) {
  Floor& f = floor_of(req);
  const int fd =
      ::openat(fd_of(f, parent), name, (fi->flags | O_CREAT | O_NOFOLLOW | O_CLOEXEC) & ~O_APPEND, mode);
  if (fd < 0) return (void)fuse_reply_err(req, errno);
  fuse_entry_param e{};
  if (int err = entry_of(f, fd_of(f, parent), name, e)) {
    ::close(fd);
    return (void)fuse_reply_err(req, err);
  }
  fi->fh = static_cast<uint64_t>(fd);
  fi->noflush = 1;
  if (fuse_reply_create(req, &e, fi) != 0) ::close(fd);
}

void ll_write_buf(fuse_req_t req, fuse_ino_t /*ino*/, fuse_bufvec* in, off_t off, fuse_file_info* fi) {
  fuse_bufvec out = sealfs::fuse::fd_bufvec(fuse_buf_size(in), static_cast<int>(fi->fh), off);
  const ssize_t n = fuse_buf_copy(&out, in, FUSE_BUF_SPLICE_NONBLOCK);
  if (n < 0) return (void)fuse_reply_err(req, static_cast<int>(-n));
  fuse_reply_write(req, static_cast<size_t>(n));
}

void ll_rename(fuse_req_t req, fuse_ino_t parent, const char* name, fuse_ino_t newparent, const char* newname,
               unsigned int flags) {
  Floor& f = floor_of(req);
  if (::renameat2(fd_of(f, parent), name, fd_of(f, newparent), newname, flags) != 0)
    return (void)fuse_reply_err(req, errno);
  fuse_reply_err(req, 0);
}

// The kernel asks for security.capability before a file's first write; a
// floor that keeps no xattrs answers at once (ENOSYS would stop the asking
// altogether, which a filesystem that keeps xattrs, as sealfs must, cannot).
void ll_getxattr(fuse_req_t req, fuse_ino_t /*ino*/, const char* /*name*/, size_t /*size*/) {
  fuse_reply_err(req, ENODATA);
}

void ll_setattr(fuse_req_t req, fuse_ino_t ino, struct stat* attr, int to_set, fuse_file_info* fi) {
  Floor& f = floor_of(req);
  if ((to_set & FUSE_SET_ATTR_SIZE) != 0) {
    const int rc = fi != nullptr ? ::ftruncate(static_cast<int>(fi->fh), attr->st_size)
                                 : ::truncate(proc_path(fd_of(f, ino)).c_str(), attr->st_size);
    if (rc != 0) return (void)fuse_reply_err(req, errno);
  }
  struct stat st {};
  if (::fstatat(fd_of(f, ino), "", &st, AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW) != 0)
    return (void)fuse_reply_err(req, errno);
  fuse_reply_attr(req, &st, kTimeout);
}

void ll_forget(fuse_req_t req, fuse_ino_t ino, uint64_t nlookup) {
  Floor& f = floor_of(req);
  if (ino != FUSE_ROOT_ID) {
    std::lock_guard lock(f.mu);
    auto* node = reinterpret_cast<Node*>(ino);
    node->lookups -= std::min(node->lookups, nlookup);
    if (node->lookups == 0) {
      struct stat st {};
      if (::fstatat(node->fd.get(), "", &st, AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW) == 0)
        f.nodes.erase({st.st_dev, st.st_ino});
    }
  }
  fuse_reply_none(req);
}

void ll_getattr(fuse_req_t req, fuse_ino_t ino, fuse_file_info* /*fi*/) {
  struct stat st {};
  if (::fstatat(fd_of(floor_of(req), ino), "", &st, AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW) != 0)
    return (void)fuse_reply_err(req, errno);
  fuse_reply_attr(req, &st, kTimeout);
}

void ll_open(fuse_req_t req, fuse_ino_t ino, fuse_file_info* fi) {
  Floor& f = floor_of(req);
  if (f.no_open) return (void)fuse_reply_err(req, ENOSYS);
  const int fd = ::open(proc_path(fd_of(f, ino)).c_str(), (fi->flags & ~O_NOFOLLOW) | O_CLOEXEC);
  if (fd < 0) return (void)fuse_reply_err(req, errno);
  fi->fh = static_cast<uint64_t>(fd);
  fi->keep_cache = 1;
  fi->noflush = 1;
  if (fuse_reply_open(req, fi) != 0) ::close(fd);
}

void ll_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, fuse_file_info* fi) {
  Floor& f = floor_of(req);
  UniqueFd own;  // no_open: READs come with fh 0
  int fd = static_cast<int>(fi->fh);
  if (f.no_open) {
    own.reset(::open(proc_path(fd_of(f, ino)).c_str(), O_RDONLY | O_CLOEXEC));
    if (!own) return (void)fuse_reply_err(req, errno);
    fd = own.get();
  }
  fuse_bufvec buf = sealfs::fuse::fd_bufvec(size, fd, off);
  fuse_reply_data(req, &buf, FUSE_BUF_SPLICE_MOVE);
}

void ll_release(fuse_req_t req, fuse_ino_t /*ino*/, fuse_file_info* fi) {
  ::close(static_cast<int>(fi->fh));
  fuse_reply_err(req, 0);
}

struct DirCloser {
  void operator()(DIR* d) const { ::closedir(d); }
};
struct DirStream {
  std::unique_ptr<DIR, DirCloser> dir;
};

void ll_opendir(fuse_req_t req, fuse_ino_t ino, fuse_file_info* fi) {
  const int fd = ::openat(fd_of(floor_of(req), ino), ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return (void)fuse_reply_err(req, errno);
  auto stream = std::make_unique<DirStream>();
  stream->dir.reset(::fdopendir(fd));
  if (!stream->dir) {
    ::close(fd);
    return (void)fuse_reply_err(req, ENOMEM);
  }
  fi->fh = reinterpret_cast<uint64_t>(stream.get());
  if (fuse_reply_open(req, fi) == 0) static_cast<void>(stream.release());
}

void ll_readdir(fuse_req_t req, fuse_ino_t /*ino*/, size_t size, off_t off, fuse_file_info* fi) {
  DIR* d = reinterpret_cast<DirStream*>(fi->fh)->dir.get();
  std::vector<char> buf(size);
  std::size_t used = 0;
  ::seekdir(d, off);
  for (;;) {
    const long here = ::telldir(d);
    const dirent* de = ::readdir(d);
    if (de == nullptr) break;
    struct stat st {};
    st.st_ino = de->d_ino;
    st.st_mode = static_cast<mode_t>(de->d_type) << 12;
    const std::size_t n =
        fuse_add_direntry(req, buf.data() + used, size - used, de->d_name, &st, ::telldir(d));
    if (n > size - used) {
      ::seekdir(d, here);
      break;
    }
    used += n;
  }
  fuse_reply_buf(req, buf.data(), used);
}

void ll_releasedir(fuse_req_t req, fuse_ino_t /*ino*/, fuse_file_info* fi) {
  std::unique_ptr<DirStream> stream(reinterpret_cast<DirStream*>(fi->fh));
  fuse_reply_err(req, 0);
}

void ll_init(void* /*userdata*/, fuse_conn_info* conn) {
  conn->want |= conn->capable & (FUSE_CAP_SPLICE_MOVE | FUSE_CAP_SPLICE_READ);
}

struct SessionDeleter {
  void operator()(fuse_session* se) const { fuse_session_destroy(se); }
};
struct LoopConfigDeleter {
  void operator()(fuse_loop_config* c) const { fuse_loop_cfg_destroy(c); }
};

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  Floor f;
  if (!args.empty() && args.front() == "--no-open") {
    f.no_open = true;
    args.erase(args.begin());
  }
  if (args.size() != 2) {
    std::fprintf(stderr, "usage: fuse_floor [--no-open] BACKING MOUNTPOINT\n");
    return 2;
  }
  f.root.reset(::open(args[0].c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
  if (!f.root) {
    std::fprintf(stderr, "fuse_floor: %s: %s\n", args[0].c_str(), std::strerror(errno));
    return 1;
  }
  fuse_lowlevel_ops ops{};
  ops.init = ll_init;
  ops.lookup = ll_lookup;
  ops.forget = ll_forget;
  ops.getattr = ll_getattr;
  ops.open = ll_open;
  ops.read = ll_read;
  ops.release = ll_release;
  ops.opendir = ll_opendir;
  ops.readdir = ll_readdir;
  ops.releasedir = ll_releasedir;
  ops.mkdir = ll_mkdir;
  ops.create = ll_create;
  ops.write_buf = ll_write_buf;
  ops.rename = ll_rename;
  ops.getxattr = ll_getxattr;
  ops.setattr = ll_setattr;
  std::vector<char*> fuse_argv = {argv[0]};
  std::string fsname = "-ofsname=fuse_floor";
  fuse_argv.push_back(fsname.data());
  fuse_args fargs = FUSE_ARGS_INIT(static_cast<int>(fuse_argv.size()), fuse_argv.data());
  std::unique_ptr<fuse_session, SessionDeleter> se(fuse_session_new(&fargs, &ops, sizeof ops, &f));
  if (!se || fuse_session_mount(se.get(), args[1].c_str()) != 0) {
    std::fprintf(stderr, "fuse_floor: cannot mount on %s\n", args[1].c_str());
    return 1;
  }
  fuse_set_signal_handlers(se.get());
  std::unique_ptr<fuse_loop_config, LoopConfigDeleter> config(fuse_loop_cfg_create());
  fuse_loop_cfg_set_max_threads(config.get(), 10);
  const int rc = fuse_session_loop_mt(se.get(), config.get());
  fuse_remove_signal_handlers(se.get());
  fuse_session_unmount(se.get());
  return rc == 0 ? 0 : 1;
}
