// cache_bench's workload: entry files, file system helpers, save, load, list.
#include "tests/bench/cache_bench_workload.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <map>
#include <stdexcept>
#include <string_view>
#include <system_error>

#include "core/base/digest.hpp"
#include "core/base/unique_fd.hpp"

namespace sealfs::bench {

namespace {

constexpr const char* kFiles[] = {"device_kernel.cu", "host_kernel.cu", "kernel_lib.so", "params.pkl"};

// Content differs per key (so no two libraries are alike) and is cheap to make.
std::string filler(std::size_t size, std::uint64_t seed) {
  std::string s(size, '\0');
  std::uint64_t x = seed * 0x9E3779B97F4A7C15ull + 1;
  for (std::size_t i = 0; i < size; i += 8) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    std::memcpy(s.data() + i, &x, std::min<std::size_t>(8, size - i));
  }
  return s;
}

// A 64-bit little-endian ELF shared-object header, then filler: looks like a
// host library without CUDA images (sealfs's tilelang profile scans *.so).
std::string elf_library(std::size_t size, std::uint64_t seed) {
  std::string lib = filler(std::max<std::size_t>(size, 64), seed);
  unsigned char header[64] = {0x7f, 'E', 'L', 'F', 2, 1, 1, 0};
  auto put16 = [&](int at, std::uint16_t v) { std::memcpy(header + at, &v, 2); };
  auto put32 = [&](int at, std::uint32_t v) { std::memcpy(header + at, &v, 4); };
  put16(16, 3);   // ET_DYN
  put16(18, 62);  // EM_X86_64
  put32(20, 1);   // EV_CURRENT
  put16(52, 64);  // e_ehsize
  std::memcpy(lib.data(), header, sizeof header);
  return lib;
}

// The tail every key's file of this size shares (made once per size).
std::shared_ptr<const std::string> shared_tail(std::size_t size) {
  static std::map<std::size_t, std::shared_ptr<const std::string>> tails;
  auto& t = tails[size];
  if (!t) t = std::make_shared<const std::string>(filler(size - kUniqueHead, size));
  return t;
}

FileContent content(std::size_t size, std::uint64_t seed, bool elf) {
  const std::size_t head = size <= kWholeUnique ? size : kUniqueHead;
  FileContent c{elf ? elf_library(head, seed) : filler(head, seed), nullptr};
  if (head < size) c.tail = shared_tail(size);
  return c;
}

void write_all(int fd, const char* data, std::size_t size, const fsys::path& p) {
  std::size_t done = 0;
  while (done < size) {
    ssize_t n = ::write(fd, data + done, size - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      die("write " + p.string());
    }
    done += static_cast<std::size_t>(n);
  }
}

// Every name of the entry exists; params.pkl is read (a sum of its first
// bytes per block is returned).
std::uint64_t stat_and_read_params(const fsys::path& entry) {
  struct stat st {};
  for (const char* name : kFiles) {
    if (::stat((entry / name).c_str(), &st) != 0) die("miss: " + (entry / name).string());
  }
  std::uint64_t sum = 0;
  UniqueFd fd(::open((entry / "params.pkl").c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd) die("open params.pkl");
  char buf[4096];
  ssize_t n;
  while ((n = ::read(fd.get(), buf, sizeof buf)) > 0) sum += static_cast<unsigned char>(buf[0]);
  if (n < 0) die("read params.pkl");
  return sum;
}

// kernel_lib.so behind fd mapped and every page touched.
std::uint64_t map_library(int fd, std::size_t page) {
  struct stat st {};
  if (::fstat(fd, &st) != 0) die("fstat kernel_lib.so");
  const auto size = static_cast<std::size_t>(st.st_size);
  void* map = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
  if (map == MAP_FAILED) die("mmap kernel_lib.so");
  const auto* bytes = static_cast<const unsigned char*>(map);
  std::uint64_t sum = 0;
  for (std::size_t i = 0; i < size; i += page) sum += bytes[i];
  ::munmap(map, size);
  return sum;
}

std::string read_small_file(const fsys::path& p) {
  UniqueFd fd(::open(p.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd) die("open " + p.string());
  char buf[256];
  const ssize_t n = ::read(fd.get(), buf, sizeof buf);
  if (n < 0) die("read " + p.string());
  return std::string(buf, static_cast<std::size_t>(n));
}

void fsync_path(const fsys::path& p, int flags) {
  UniqueFd fd(::open(p.c_str(), flags | O_CLOEXEC));
  if (!fd) die("open " + p.string());
  if (::fsync(fd.get()) != 0) die("fsync " + p.string());
}

}  // namespace

[[noreturn]] void die(const std::string& what) {
  throw std::runtime_error(what + (errno != 0 ? std::string(": ") + std::strerror(errno) : std::string()));
}

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

EntryFiles entry_files(const EntryShape& shape, std::uint64_t key) {
  EntryFiles e;
  e.files.emplace_back(kFiles[0], content(shape.device_src, key * 4 + 0, false));
  e.files.emplace_back(kFiles[1], content(shape.host_src, key * 4 + 1, false));
  e.files.emplace_back(kFiles[2], content(shape.lib, key * 4 + 2, true));
  e.files.emplace_back(kFiles[3], content(shape.params, key * 4 + 3, false));
  return e;
}

std::string sha256_hex(const FileContent& c) {
  Sha256Hasher h;
  h.update(std::string_view(c.head));
  if (c.tail) h.update(std::string_view(*c.tail));
  return to_hex(h.finish());
}

std::string key_name(std::size_t i) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "k%08zu", i);
  return buf;
}

// ---- file system helpers ---------------------------------------------------------

void make_dirs(const fsys::path& p) {
  std::error_code ec;
  fsys::create_directories(p, ec);
  if (ec) throw std::runtime_error("mkdir " + p.string() + ": " + ec.message());
}

void remove_tree(const fsys::path& p) {
  std::error_code ec;
  fsys::remove_all(p, ec);
  if (ec) throw std::runtime_error("rm -r " + p.string() + ": " + ec.message());
}

void write_file(const fsys::path& p, const FileContent& data, bool sync) {
  UniqueFd fd(::open(p.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644));
  if (!fd) die("create " + p.string());
  write_all(fd.get(), data.head.data(), data.head.size(), p);
  if (data.tail) write_all(fd.get(), data.tail->data(), data.tail->size(), p);
  if (sync && ::fsync(fd.get()) != 0) die("fsync " + p.string());
}

void write_file(const fsys::path& p, const std::string& data, bool sync) {
  write_file(p, FileContent{data, nullptr}, sync);
}

// ---- the operations -------------------------------------------------------------

// TileLang's save: temp files renamed into a staging directory, which is
// renamed into kernels/. careful = fsync every file and both directories.
void save_entry(const fsys::path& cache, const std::string& ns, const std::string& key, const EntryFiles& e,
                bool careful) {
  const fsys::path tmp = cache / "tmp";
  const fsys::path staging = cache / ns / ".staging" / (key + "_" + std::to_string(::getpid()));
  const fsys::path kernels = cache / ns / "kernels";
  if (::mkdir(staging.c_str(), 0755) != 0) die("mkdir " + staging.string());
  for (const auto& [name, data] : e.files) {
    const fsys::path t = tmp / ("tmp_" + std::to_string(::getpid()) + "_" + key + "_" + name);
    write_file(t, data, careful);
    if (::rename(t.c_str(), (staging / name).c_str()) != 0) die("rename into " + staging.string());
  }
  if (careful) fsync_path(staging, O_RDONLY | O_DIRECTORY);
  if (::rename(staging.c_str(), (kernels / key).c_str()) != 0) die("rename " + staging.string());
  if (careful) fsync_path(kernels, O_RDONLY | O_DIRECTORY);
}

void prepare_cache(const fsys::path& cache, const std::string& ns) {
  make_dirs(cache / "tmp");
  make_dirs(cache / ns / ".staging");
  make_dirs(cache / ns / "kernels");
}

// TileLang's load; returns the bytes of the library touched (a checksum of
// sorts, so nothing is optimised away). A miss is an error here.
std::uint64_t load_entry(const fsys::path& kernels, const std::string& key, std::size_t page) {
  const fsys::path entry = kernels / key;
  const std::uint64_t sum = stat_and_read_params(entry);
  UniqueFd fd(::open((entry / "kernel_lib.so").c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd) die("open kernel_lib.so");
  return sum + map_library(fd.get(), page);
}

std::uint64_t checked_load_entry(const fsys::path& kernels, const std::string& key,
                                 const fsys::path& digest_file, std::size_t page) {
  const fsys::path entry = kernels / key;
  const std::uint64_t sum = stat_and_read_params(entry);
  const std::string saved = read_small_file(digest_file);
  UniqueFd fd(::open((entry / "kernel_lib.so").c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd) die("open kernel_lib.so");
  auto digest = sha256_fd(fd.get());
  if (!digest) throw std::runtime_error("hash " + (entry / "kernel_lib.so").string() + " failed");
  if (to_hex(digest->sha256) != saved) throw std::runtime_error("seed check: digest mismatch in " + key);
  return sum + map_library(fd.get(), page);
}

// getdents64 to the end; returns the number of names.
std::size_t list_dir(const fsys::path& dir) {
  UniqueFd fd(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!fd) die("open " + dir.string());
  alignas(8) char buf[64 * 1024];
  std::size_t count = 0;
  for (;;) {
    long n = ::syscall(SYS_getdents64, fd.get(), buf, sizeof buf);
    if (n < 0) die("getdents64 " + dir.string());
    if (n == 0) break;
    for (long off = 0; off < n;) {
      auto* d = reinterpret_cast<struct dirent64*>(buf + off);
      if (std::strcmp(d->d_name, ".") != 0 && std::strcmp(d->d_name, "..") != 0) ++count;
      off += d->d_reclen;
    }
  }
  return count;
}

}  // namespace sealfs::bench
