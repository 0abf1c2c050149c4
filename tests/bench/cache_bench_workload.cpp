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
#include <stdexcept>
#include <system_error>

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
  e.files.emplace_back(kFiles[0], filler(shape.device_src, key * 4 + 0));
  e.files.emplace_back(kFiles[1], filler(shape.host_src, key * 4 + 1));
  e.files.emplace_back(kFiles[2], elf_library(shape.lib, key * 4 + 2));
  e.files.emplace_back(kFiles[3], filler(shape.params, key * 4 + 3));
  return e;
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

void write_file(const fsys::path& p, const std::string& data, bool sync) {
  UniqueFd fd(::open(p.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644));
  if (!fd) die("create " + p.string());
  std::size_t done = 0;
  while (done < data.size()) {
    ssize_t n = ::write(fd.get(), data.data() + done, data.size() - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      die("write " + p.string());
    }
    done += static_cast<std::size_t>(n);
  }
  if (sync && ::fsync(fd.get()) != 0) die("fsync " + p.string());
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
  struct stat st {};
  for (const char* name : kFiles) {
    if (::stat((entry / name).c_str(), &st) != 0) die("miss: " + (entry / name).string());
  }
  std::uint64_t sum = 0;
  {
    UniqueFd fd(::open((entry / "params.pkl").c_str(), O_RDONLY | O_CLOEXEC));
    if (!fd) die("open params.pkl");
    char buf[4096];
    ssize_t n;
    while ((n = ::read(fd.get(), buf, sizeof buf)) > 0) sum += static_cast<unsigned char>(buf[0]);
    if (n < 0) die("read params.pkl");
  }
  UniqueFd fd(::open((entry / "kernel_lib.so").c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd) die("open kernel_lib.so");
  if (::fstat(fd.get(), &st) != 0) die("fstat kernel_lib.so");
  const auto size = static_cast<std::size_t>(st.st_size);
  void* map = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd.get(), 0);
  if (map == MAP_FAILED) die("mmap kernel_lib.so");
  const auto* bytes = static_cast<const unsigned char*>(map);
  for (std::size_t i = 0; i < size; i += page) sum += bytes[i];
  ::munmap(map, size);
  return sum;
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
