// cache_bench's workload (see cache_bench.cpp): the files of a TileLang-shaped
// kernel-cache entry, the file system helpers, and TileLang's save, load and
// listing as the benchmark times them.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <filesystem>
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

struct EntryFiles {
  std::vector<std::pair<std::string, std::string>> files;  // name, content
};

EntryFiles entry_files(const EntryShape& shape, std::uint64_t key);

std::string key_name(std::size_t i);

void make_dirs(const fsys::path& p);
void remove_tree(const fsys::path& p);
void write_file(const fsys::path& p, const std::string& data, bool sync);

// TileLang's save: temp files renamed into a staging directory, which is
// renamed into kernels/. careful = fsync every file and both directories.
void save_entry(const fsys::path& cache, const std::string& ns, const std::string& key, const EntryFiles& e,
                bool careful);

void prepare_cache(const fsys::path& cache, const std::string& ns);

// TileLang's load; returns the bytes of the library touched (a checksum of
// sorts, so nothing is optimised away). A miss is an error here.
std::uint64_t load_entry(const fsys::path& kernels, const std::string& key, std::size_t page);

// getdents64 to the end; returns the number of names.
std::size_t list_dir(const fsys::path& dir);

}  // namespace sealfs::bench
