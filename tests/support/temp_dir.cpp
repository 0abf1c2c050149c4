#include "tests/support/temp_dir.hpp"

#include <fcntl.h>
#include <ftw.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <vector>

namespace sealfs::test {

TempDir::TempDir(std::string_view prefix) {
  const char* base = std::getenv("TMPDIR");
  std::string tmpl = std::string(base && *base ? base : "/tmp") + "/" + std::string(prefix) + ".XXXXXX";
  std::vector<char> buf(tmpl.begin(), tmpl.end());
  buf.push_back('\0');
  if (::mkdtemp(buf.data()) == nullptr)
    throw std::runtime_error("mkdtemp " + tmpl + ": " + std::strerror(errno));
  path_ = buf.data();
}

TempDir::~TempDir() { remove_tree(path_); }

namespace {
int remove_one(const char* path, const struct stat* st, int /*flag*/, struct FTW* /*ftw*/) {
  // Directories may have been left read-only by a test; make them writable first.
  if (st && S_ISDIR(st->st_mode)) {
    ::chmod(path, 0700);
    return ::rmdir(path) == 0 || errno == ENOENT ? 0 : 0;
  }
  ::unlink(path);
  return 0;
}
int make_writable(const char* path, const struct stat* st, int /*flag*/, struct FTW* /*ftw*/) {
  if (st && S_ISDIR(st->st_mode)) ::chmod(path, 0700);
  return 0;
}
}  // namespace

bool remove_tree(const std::string& path) {
  ::nftw(path.c_str(), make_writable, 16, FTW_PHYS);
  ::nftw(path.c_str(), remove_one, 16, FTW_DEPTH | FTW_PHYS);
  struct stat st {};
  return ::lstat(path.c_str(), &st) != 0;
}

void write_file(const std::string& path, std::string_view data, mode_t mode) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, mode);
  if (fd < 0) throw std::runtime_error("open " + path + ": " + std::strerror(errno));
  std::size_t done = 0;
  while (done < data.size()) {
    ssize_t n = ::write(fd, data.data() + done, data.size() - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      int e = errno;
      ::close(fd);
      throw std::runtime_error("write " + path + ": " + std::strerror(e));
    }
    done += static_cast<std::size_t>(n);
  }
  ::close(fd);
}

std::optional<std::string> read_file(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return std::nullopt;
  std::string out;
  char buf[65536];
  for (;;) {
    ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      ::close(fd);
      return std::nullopt;
    }
    if (n == 0) break;
    out.append(buf, static_cast<std::size_t>(n));
  }
  ::close(fd);
  return out;
}

bool exists_nofollow(const std::string& path) {
  struct stat st {};
  return ::lstat(path.c_str(), &st) == 0;
}

void make_dirs(const std::string& path, mode_t mode) {
  std::string cur;
  for (std::size_t i = 0; i <= path.size(); ++i) {
    if (i == path.size() || path[i] == '/') {
      if (!cur.empty() && ::mkdir(cur.c_str(), mode) != 0 && errno != EEXIST)
        throw std::runtime_error("mkdir " + cur + ": " + std::strerror(errno));
    }
    if (i < path.size()) cur.push_back(path[i]);
  }
}

}  // namespace sealfs::test
