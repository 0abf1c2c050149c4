// digest_bench: SHA-256 throughput of core/digest against OpenSSL's own
// `openssl speed`, on one core.
//
//   digest_bench [--mem-bytes N] [--file-bytes N] [--dir D] [--reps R] [--no-openssl]
//
// 1. memory: Sha256Hasher over N bytes fed in 1 MiB blocks (one block reused,
//    as `openssl speed` does, so only the hash is measured);
// 2. file:   sha256_fd over a file of N bytes already in the page cache
//    (pread + hash, what the verifier pays on a warm cache);
// 3. openssl speed -evp sha256 -bytes 1048576 -seconds 3, and ours as a
//    percentage of it.
// Each measurement is the best of R runs. Rates are per second of this
// thread's CPU time (user + system), because `openssl speed` by default
// counts user CPU time too: on a loaded machine wall-clock figures would
// compare our share of the CPU with OpenSSL's work per CPU second. Wall-clock
// rates are printed alongside.
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/base/digest.hpp"
#include "core/base/unique_fd.hpp"

namespace {

using sealfs::UniqueFd;

// This thread's CPU time, user + system (system counts: pread's copy out of
// the page cache is part of what hashing a file costs).
struct ThreadCpuClock {
  using duration = std::chrono::nanoseconds;
  using rep = duration::rep;
  using period = duration::period;
  using time_point = std::chrono::time_point<ThreadCpuClock>;
  [[maybe_unused]] static constexpr bool is_steady = true;  // the Clock requirements
  static time_point now() {
    timespec ts{};
    ::clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return time_point(std::chrono::seconds(ts.tv_sec) + std::chrono::nanoseconds(ts.tv_nsec));
  }
};
using Wall = std::chrono::steady_clock;

struct Rate {
  double cpu = 0;   // MB per CPU second
  double wall = 0;  // MB per wall-clock second
};

// Times f() by both clocks.
template <class F>
std::pair<std::chrono::nanoseconds, std::chrono::nanoseconds> timed(F&& f) {
  auto c0 = ThreadCpuClock::now();
  auto w0 = Wall::now();
  f();
  auto w = Wall::now() - w0;
  auto c = ThreadCpuClock::now() - c0;
  return {c, std::chrono::duration_cast<std::chrono::nanoseconds>(w)};
}

constexpr std::size_t kBlock = 1u << 20;

struct Options {
  std::uint64_t mem_bytes = 1ull << 30;
  std::uint64_t file_bytes = 256ull << 20;
  std::string dir;
  int reps = 3;
  bool openssl = true;
};

double mb_per_s(std::uint64_t bytes, std::chrono::nanoseconds d) {
  return static_cast<double>(bytes) / 1e6 / std::chrono::duration<double>(d).count();
}

std::vector<std::byte> pattern_block() {
  std::vector<std::byte> block(kBlock);
  std::uint32_t x = 0x12345678;
  for (auto& b : block) {  // xorshift: not all zeros, so nothing is special-cased
    x ^= x << 13;
    x ^= x >> 17;
    x ^= x << 5;
    b = static_cast<std::byte>(x);
  }
  return block;
}

Rate bench_memory(std::uint64_t bytes, int reps) {
  auto block = pattern_block();
  Rate best;
  for (int r = 0; r < reps; ++r) {
    sealfs::Sha256Hasher h;
    sealfs::Sha256 digest{};
    auto [cpu, wall] = timed([&] {
      for (std::uint64_t done = 0; done < bytes; done += kBlock) h.update(block);
      digest = h.finish();
    });
    if (digest[0] == 0 && digest[1] == 0 && digest[2] == 0) std::puts("");  // keep the result alive
    best.cpu = std::max(best.cpu, mb_per_s(bytes, cpu));
    best.wall = std::max(best.wall, mb_per_s(bytes, wall));
  }
  return best;
}

// A temporary file of `bytes` bytes, unlinked at once (the fd keeps it) and
// read back once so that it sits in the page cache.
std::optional<UniqueFd> make_cached_file(const std::string& dir, std::uint64_t bytes) {
  std::string tmpl = dir + "/digest_bench.XXXXXX";
  std::vector<char> name(tmpl.begin(), tmpl.end());
  name.push_back('\0');
  UniqueFd fd(::mkostemp(name.data(), O_CLOEXEC));
  if (!fd) {
    std::fprintf(stderr, "mkostemp %s: %s\n", tmpl.c_str(), std::strerror(errno));
    return std::nullopt;
  }
  ::unlink(name.data());
  auto block = pattern_block();
  for (std::uint64_t off = 0; off < bytes;) {
    std::size_t n = static_cast<std::size_t>(std::min<std::uint64_t>(kBlock, bytes - off));
    ssize_t w = ::pwrite(fd.get(), block.data(), n, static_cast<off_t>(off));
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) {
      std::fprintf(stderr, "pwrite: %s\n", std::strerror(errno));
      return std::nullopt;
    }
    off += static_cast<std::uint64_t>(w);
  }
  if (!sealfs::sha256_fd(fd.get()).ok()) return std::nullopt;  // warm the page cache
  return fd;
}

Rate bench_file(int fd, std::uint64_t bytes, int reps) {
  Rate best;
  for (int r = 0; r < reps; ++r) {
    std::uint64_t counted = 0;
    sealfs::Result<sealfs::FileDigest> res = sealfs::make_error(EIO, "not run");
    auto [cpu, wall] = timed([&] { res = sealfs::sha256_fd(fd, &counted); });
    if (!res.ok() || res->size != bytes || counted != bytes) {
      std::fprintf(stderr, "sha256_fd failed or short: %s\n",
                   res.ok() ? "short" : res.error().message.c_str());
      return {};
    }
    best.cpu = std::max(best.cpu, mb_per_s(bytes, cpu));
    best.wall = std::max(best.wall, mb_per_s(bytes, wall));
  }
  return best;
}

// `openssl speed` prints, last, "sha256  <N>k" (thousands of bytes per second
// of user CPU time) for the one block size asked for. Returns MB/s, or nullopt.
std::optional<double> openssl_speed() {
  struct PcloseDeleter {
    void operator()(FILE* f) const { ::pclose(f); }
  };
  std::unique_ptr<FILE, PcloseDeleter> pipe(
      ::popen("openssl speed -evp sha256 -bytes 1048576 -seconds 3 2>/dev/null", "r"));
  if (!pipe) return std::nullopt;
  std::optional<double> result;
  std::array<char, 512> line{};
  while (std::fgets(line.data(), static_cast<int>(line.size()), pipe.get()) != nullptr) {
    std::string_view l(line.data());
    std::string lower;
    for (char c : l) lower.push_back(static_cast<char>(std::tolower(static_cast<unsigned char>(c))));
    if (lower.rfind("sha256", 0) != 0) continue;
    auto k = l.rfind('k');
    auto space = l.rfind(' ', k);
    if (k == std::string_view::npos || space == std::string_view::npos) continue;
    std::string number(l.substr(space + 1, k - space - 1));
    char* end = nullptr;
    double thousands = std::strtod(number.c_str(), &end);
    if (end != number.c_str()) result = thousands / 1000.0;  // 1000s of bytes/s → MB/s
  }
  return result;
}

bool parse_args(int argc, char** argv, Options* opt) {
  for (int i = 1; i < argc; ++i) {
    std::string_view a = argv[i];
    auto next = [&]() -> const char* { return i + 1 < argc ? argv[++i] : nullptr; };
    if (a == "--no-openssl") {
      opt->openssl = false;
    } else if (a == "--mem-bytes" || a == "--file-bytes" || a == "--reps" || a == "--dir") {
      const char* v = next();
      if (v == nullptr) return false;
      if (a == "--dir") {
        opt->dir = v;
      } else if (a == "--reps") {
        opt->reps = std::max(1, std::atoi(v));
      } else {
        (a == "--mem-bytes" ? opt->mem_bytes : opt->file_bytes) = std::strtoull(v, nullptr, 0);
      }
    } else {
      return false;
    }
  }
  if (opt->dir.empty()) {
    const char* tmp = std::getenv("TMPDIR");
    opt->dir = tmp != nullptr && *tmp != '\0' ? tmp : "/tmp";
  }
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  Options opt;
  if (!parse_args(argc, argv, &opt)) {
    std::fprintf(stderr, "usage: %s [--mem-bytes N] [--file-bytes N] [--dir D] [--reps R] [--no-openssl]\n",
                 argv[0]);
    return 2;
  }

  Rate mem = bench_memory(opt.mem_bytes, opt.reps);
  std::printf(
      "sealfs Sha256Hasher, memory, 1 MiB blocks: %8.1f MB/s per CPU s, %8.1f MB/s wall  (%llu MiB, best of "
      "%d)\n",
      mem.cpu, mem.wall, static_cast<unsigned long long>(opt.mem_bytes >> 20), opt.reps);

  auto file = make_cached_file(opt.dir, opt.file_bytes);
  if (!file) return 1;
  Rate from_file = bench_file(file->get(), opt.file_bytes, opt.reps);
  if (from_file.cpu == 0) return 1;
  std::printf(
      "sealfs sha256_fd, page-cached file:        %8.1f MB/s per CPU s, %8.1f MB/s wall  (%llu MiB, best of "
      "%d)\n",
      from_file.cpu, from_file.wall, static_cast<unsigned long long>(opt.file_bytes >> 20), opt.reps);

  if (!opt.openssl) return 0;
  auto ref = openssl_speed();
  if (!ref) {
    std::printf("openssl speed: not available, no comparison\n");
    return 0;
  }
  std::printf("openssl speed -evp sha256, 1 MiB blocks:   %8.1f MB/s per user CPU s\n", *ref);
  std::printf("per CPU second: memory %.1f%% of openssl, file %.1f%% of openssl (target >= 90%%)\n",
              100.0 * mem.cpu / *ref, 100.0 * from_file.cpu / *ref);
  return 0;
}
