// cache_bench's workload (see cache_bench.cpp): the files of a TileLang-shaped
// kernel-cache entry, the file system helpers, and TileLang's save, load and
// listing as the benchmark times them.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace sealfs::bench {

namespace fsys = std::filesystem;
using Clock = std::chrono::steady_clock;

// Throws what failed, with strerror(errno) where errno is set.
[[noreturn]] void die(const std::string& what);

double seconds_since(Clock::time_point start);

struct EntryShape {
  std::size_t device_src = 24 * 1024;
  std::size_t host_src = 8 * 1024;
  std::size_t lib = 512 * 1024;
  std::size_t params = 300;
};

// A file's content: a head that differs per key, then a tail shared by every
// key of the same shape (large libraries would otherwise take gigabytes of
// memory: only their first kUniqueHead bytes differ from key to key).
struct FileContent {
  std::string head;
  std::shared_ptr<const std::string> tail;  // may be null
  std::size_t size() const { return head.size() + (tail ? tail->size() : 0); }
};

struct EntryFiles {
  std::vector<std::pair<std::string, FileContent>> files;  // name, content
  const FileContent& library() const { return files[2].second; }
};

// Files up to this size differ entirely from key to key; larger ones only in
// their first kUniqueHead bytes.
inline constexpr std::size_t kWholeUnique = 1u << 20;
inline constexpr std::size_t kUniqueHead = 64u << 10;

EntryFiles entry_files(const EntryShape& shape, std::uint64_t key);

// The SHA-256 of a file's content, as lowercase hex.
std::string sha256_hex(const FileContent& c);

std::string key_name(std::size_t i);

void make_dirs(const fsys::path& p);
void remove_tree(const fsys::path& p);
void write_file(const fsys::path& p, const FileContent& data, bool sync);
void write_file(const fsys::path& p, const std::string& data, bool sync);

// TileLang's save: temp files renamed into a staging directory, which is
// renamed into kernels/. careful = fsync every file and both directories.
void save_entry(const fsys::path& cache, const std::string& ns, const std::string& key, const EntryFiles& e,
                bool careful);

void prepare_cache(const fsys::path& cache, const std::string& ns);

// TileLang's load; returns the bytes of the library touched (a checksum of
// sorts, so nothing is optimised away). A miss is an error here.
std::uint64_t load_entry(const fsys::path& kernels, const std::string& key, std::size_t page);

// The seed's in-process check, then the load: the SHA-256 of kernel_lib.so
// is computed before the load reads it and compared with the digest saved at
// save time (digest_file, lowercase hex). A mismatch is an error here.
std::uint64_t checked_load_entry(const fsys::path& kernels, const std::string& key,
                                 const fsys::path& digest_file, std::size_t page);

// getdents64 to the end; returns the number of names.
std::size_t list_dir(const fsys::path& dir);

}  // namespace sealfs::bench
