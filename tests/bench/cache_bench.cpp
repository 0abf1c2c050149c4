// The kernel-cache benchmark of issue 6: a TileLang-like workload on the plain
// backing directory, on bindfs (the no-verification FUSE peer), on fuse_floor
// (the cheapest FUSE passthrough there is, no checks and no fsync: the floor
// of what any FUSE layer costs) and on sealfs, in one run, alternated,
// medians of several runs, ratios to plain.
//
// Entries are what TileLang's KernelCache writes: <ns>/kernels/<key>/ with
// device_kernel.cu (24 KiB), host_kernel.cu (8 KiB), kernel_lib.so (512 KiB,
// an ELF header and filler) and params.pkl (300 B).
//   save       the TileLang protocol: each file written to tmp/ and renamed
//              into <ns>/.staging/<key>_<pid>/, which is renamed to
//              kernels/<key>. TileLang itself never fsyncs; "plain+fsync" is
//              the careful writer R1 is compared with (fsync each file, the
//              staging directory and kernels/).
//   cold load  the first load of every entry after mounting (sealfs hashes).
//   warm load  the next load: the four files exist, params.pkl is read,
//              kernel_lib.so is mapped and every page touched.
//   readdir    a full listing of a kernels/ with --readdir-entries entries.
// The scale phase (--scale N) builds a store of N entries and measures the
// mount time and the daemon's RSS after N lookups.
//
// Figures depend on the machine and its load: this is run by hand, never by
// ctest. Needs FUSE (root or fusermount3) and, for the bindfs column, bindfs.
#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "core/base/unique_fd.hpp"
#include "tests/support/process.hpp"

namespace {

namespace fsys = std::filesystem;
using Clock = std::chrono::steady_clock;
using sealfs::UniqueFd;

[[noreturn]] void die(const std::string& what) {
  throw std::runtime_error(what + (errno != 0 ? std::string(": ") + std::strerror(errno) : std::string()));
}

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// ---- the workload's files ------------------------------------------------------

constexpr const char* kFiles[] = {"device_kernel.cu", "host_kernel.cu", "kernel_lib.so", "params.pkl"};

struct EntryShape {
  std::size_t device_src = 24 * 1024;
  std::size_t host_src = 8 * 1024;
  std::size_t lib = 512 * 1024;
  std::size_t params = 300;
};

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

struct EntryFiles {
  std::vector<std::pair<std::string, std::string>> files;  // name, content
};

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

void fsync_path(const fsys::path& p, int flags) {
  UniqueFd fd(::open(p.c_str(), flags | O_CLOEXEC));
  if (!fd) die("open " + p.string());
  if (::fsync(fd.get()) != 0) die("fsync " + p.string());
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

// ---- mounts -----------------------------------------------------------------------

// A command run to its end, its output dropped; its exit status.
int run_quiet(const std::vector<std::string>& argv) {
  return sealfs::test::run_process(argv, {}, std::chrono::minutes(10)).status;
}

dev_t device_of(const fsys::path& p) {
  struct stat st {};
  if (::stat(p.c_str(), &st) != 0) die("stat " + p.string());
  return st.st_dev;
}

enum class Kind { kPlain, kPlainFsync, kBindfs, kFloor, kFloorNoOpen, kSealfs };

// One column of the table: what is mounted, and for sealfs which binary with
// which options (variants compare a lever or an older build in the same run).
struct Target {
  Kind kind = Kind::kPlain;
  std::string name;
  std::string binary;   // sealfs only
  std::string options;  // sealfs only
  bool plain() const { return kind == Kind::kPlain || kind == Kind::kPlainFsync; }
  bool floor() const { return kind == Kind::kFloor || kind == Kind::kFloorNoOpen; }
};

struct Config {
  std::string sealfs = SEALFS_BINARY_PATH;
  std::string sealfs_options = "profile=tilelang";
  std::string bindfs = "bindfs";
  std::string fuse_floor = FUSE_FLOOR_PATH;
  fsys::path work;
  std::size_t entries = 200;
  std::size_t readdir_entries = 10000;
  std::size_t scale = 100000;
  int runs = 5;
  bool json = false;
  bool with_bindfs = true;
  bool with_floor = true;
  std::vector<std::string> only;      // target names to run (empty: all)
  std::vector<std::string> variants;  // NAME=BINARY[|OPTIONS]: more sealfs columns
  bool saves = true;
  bool loads = true;
};

// A FUSE daemon in the foreground over backing at mountpoint; unmounted and
// reaped by the destructor. Plain targets mount nothing.
class Mounted {
 public:
  Mounted(const Config& cfg, const Target& t, const fsys::path& backing, const fsys::path& mountpoint)
      : mountpoint_(backing) {
    if (t.plain()) return;
    make_dirs(mountpoint);
    mountpoint_ = mountpoint;
    std::vector<std::string> argv;
    if (t.kind == Kind::kSealfs) {
      argv = {t.binary, "-f", "-o", t.options, backing.string(), mountpoint.string()};
    } else if (t.floor()) {
      argv = {cfg.fuse_floor, backing.string(), mountpoint.string()};
      if (t.kind == Kind::kFloorNoOpen) argv.insert(argv.begin() + 1, "--no-open");
    } else {
      argv = {cfg.bindfs, "-f", "--no-allow-other", backing.string(), mountpoint.string()};
    }
    const dev_t before = device_of(mountpoint);
    const auto start = Clock::now();
    pid_ = sealfs::test::spawn_process(argv, (cfg.work / "daemon.log").string());
    if (pid_ < 0) die("start " + argv[0]);
    for (;;) {
      int status = 0;
      if (::waitpid(pid_, &status, WNOHANG) == pid_) {
        pid_ = -1;
        throw std::runtime_error(t.name + " exited before mounting; see " +
                                 (cfg.work / "daemon.log").string());
      }
      struct stat st {};
      if (::stat(mountpoint.c_str(), &st) == 0 && st.st_dev != before) break;
      if (seconds_since(start) > 30) throw std::runtime_error(t.name + " did not mount");
      std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
    mount_seconds_ = seconds_since(start);
  }
  Mounted(const Mounted&) = delete;
  Mounted& operator=(const Mounted&) = delete;
  ~Mounted() {
    if (pid_ <= 0) return;
    run_quiet({"fusermount3", "-u", mountpoint_.string()});
    int status = 0;
    for (int i = 0; i < 200 && ::waitpid(pid_, &status, WNOHANG) == 0; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(25));
    }
    if (::waitpid(pid_, &status, WNOHANG) == 0) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, &status, 0);
      run_quiet({"umount", "-l", mountpoint_.string()});
    }
  }
  const fsys::path& root() const { return mountpoint_; }
  pid_t pid() const { return pid_; }
  double mount_seconds() const { return mount_seconds_; }

 private:
  fsys::path mountpoint_;
  pid_t pid_ = -1;
  double mount_seconds_ = 0;
};

// VmRSS of pid in KiB.
long rss_kib(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("VmRSS:", 0) == 0) return std::strtol(line.c_str() + 6, nullptr, 10);
  }
  return -1;
}

// ---- results --------------------------------------------------------------------

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

struct Results {
  // operation -> target -> samples (seconds)
  std::map<std::string, std::map<std::string, std::vector<double>>> samples;
  std::vector<std::string> op_order;
  std::map<std::string, double> scalars;
  void add(const std::string& op, const Target& t, double s) {
    if (std::find(op_order.begin(), op_order.end(), op) == op_order.end()) op_order.push_back(op);
    samples[op][t.name].push_back(s);
  }
  double med(const std::string& op, const std::string& target) const {
    auto o = samples.find(op);
    if (o == samples.end()) return 0;
    auto t = o->second.find(target);
    return t == o->second.end() ? 0 : median(t->second);
  }
};

// ---- phases ---------------------------------------------------------------------

const std::string kNs = "bench";

// Each key's files, made once (content generation is not what is measured).
std::vector<EntryFiles> make_entries(const EntryShape& shape, std::size_t n) {
  std::vector<EntryFiles> v;
  v.reserve(n);
  for (std::size_t i = 0; i < n; ++i) v.push_back(entry_files(shape, i));
  return v;
}

double time_save(const Config& cfg, const Target& t, const std::vector<EntryFiles>& entries, int run) {
  const fsys::path backing = cfg.work / ("save-" + t.name + "-" + std::to_string(run));
  remove_tree(backing);
  make_dirs(backing);
  double elapsed = 0;
  {
    Mounted m(cfg, t, backing, cfg.work / "mnt");
    prepare_cache(m.root(), kNs);
    const bool careful = t.kind == Kind::kPlainFsync;
    const auto start = Clock::now();
    for (std::size_t i = 0; i < entries.size(); ++i)
      save_entry(m.root(), kNs, key_name(i), entries[i], careful);
    elapsed = seconds_since(start);
  }
  remove_tree(backing);
  return elapsed;
}

std::uint64_t load_all(const fsys::path& root, std::size_t n, std::size_t page) {
  std::uint64_t sum = 0;
  const fsys::path kernels = root / kNs / "kernels";
  for (std::size_t i = 0; i < n; ++i) sum += load_entry(kernels, key_name(i), page);
  return sum;
}

// Writes count small TileLang-shaped entries directly into store/rel and
// seals each as a directory entry offline (`sealfs adopt`, trust on first
// use; no fsync: this is setup, not what is measured).
void add_adopted_entries(const Config& cfg, const fsys::path& store, const std::string& rel,
                         std::size_t count) {
  const fsys::path dir = store / rel;
  make_dirs(dir);
  const EntryShape tiny{64, 64, 256, 64};
  constexpr std::size_t kBatch = 4000;  // paths per adopt command (ARG_MAX)
  for (std::size_t first = 0; first < count; first += kBatch) {
    std::vector<std::string> argv = {cfg.sealfs, "adopt", "-o", cfg.sealfs_options + ",durability=none",
                                     store.string()};
    for (std::size_t i = first; i < std::min(count, first + kBatch); ++i) {
      const fsys::path e = dir / key_name(i);
      make_dirs(e);
      for (const auto& [name, data] : entry_files(tiny, i).files) write_file(e / name, data, false);
      argv.push_back(rel + "/" + key_name(i));
    }
    if (run_quiet(argv) != 0) throw std::runtime_error("sealfs adopt in " + dir.string() + " failed");
  }
}

// Builds B with entries (through a sealfs mount, so they are sealed) and a
// large listing directory big/kernels (sealed offline with `sealfs adopt`).
void build_load_store(const Config& cfg, const Target& sealfs, const fsys::path& store,
                      const std::vector<EntryFiles>& entries) {
  remove_tree(store);
  make_dirs(store);
  {
    Mounted m(cfg, sealfs, store, cfg.work / "mnt");
    prepare_cache(m.root(), kNs);
    for (std::size_t i = 0; i < entries.size(); ++i)
      save_entry(m.root(), kNs, key_name(i), entries[i], false);
  }
  add_adopted_entries(cfg, store, "big/kernels", cfg.readdir_entries);
}

void measure_loads(const Config& cfg, const Target& t, const fsys::path& store, std::size_t n, Results& r,
                   std::uint64_t& checksum) {
  const auto page = static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));
  Mounted m(cfg, t, store, cfg.work / "mnt");
  auto start = Clock::now();
  checksum += load_all(m.root(), n, page);
  r.add("cold load", t, seconds_since(start));
  start = Clock::now();
  checksum += load_all(m.root(), n, page);
  r.add("warm load", t, seconds_since(start));
  start = Clock::now();
  const std::size_t listed = list_dir(m.root() / "big" / "kernels");
  r.add("readdir", t, seconds_since(start));
  if (listed != cfg.readdir_entries) {
    throw std::runtime_error(t.name + ": readdir listed " + std::to_string(listed) + " of " +
                             std::to_string(cfg.readdir_entries));
  }
}

void scale_phase(const Config& cfg, Results& r, const std::vector<Target>& targets, const Target& sealfs) {
  const fsys::path store = cfg.work / "scale";
  remove_tree(store);
  auto start = Clock::now();
  add_adopted_entries(cfg, store, kNs + "/kernels", cfg.scale);
  std::cerr << "scale store: " << cfg.scale << " entries built in " << seconds_since(start) << " s\n";
  for (int run = 0; run < cfg.runs; ++run) {
    for (const Target& t : targets) {
      if (t.plain()) continue;
      Mounted m(cfg, t, store, cfg.work / "mnt");
      r.add("mount (" + std::to_string(cfg.scale) + " entries)", t, m.mount_seconds());
    }
  }
  // RSS after one lookup per name, 2 per entry (the entry and its params.pkl).
  // The daemon keeps an O_PATH fd per inode the kernel holds; where the fd
  // limit cannot hold them all (a container without CAP_SYS_RESOURCE), the
  // kernel is made to forget them every kBatch entries (drop_caches, root
  // only), as memory pressure would.
  Mounted m(cfg, sealfs, store, cfg.work / "mnt");
  const double mib = 1024;
  r.scalars["sealfs rss after mount (MiB)"] = static_cast<double>(rss_kib(m.pid())) / mib;
  struct rlimit lim {};
  ::getrlimit(RLIMIT_NOFILE, &lim);
  const std::size_t batch = std::min<std::size_t>(cfg.scale, lim.rlim_cur / 4);
  std::size_t found = 0;
  long peak = 0;
  int drops = 0;
  struct stat st {};
  const fsys::path mk = m.root() / kNs / "kernels";
  for (std::size_t i = 0; i < cfg.scale; ++i) {
    found += ::stat((mk / key_name(i) / "params.pkl").c_str(), &st) == 0;
    if ((i + 1) % batch == 0 && i + 1 < cfg.scale) {
      const long now = rss_kib(m.pid());
      if (drops == 0) {
        r.scalars["sealfs rss holding " + std::to_string(2 * batch) + " inodes (MiB)"] =
            static_cast<double>(now) / mib;
      }
      peak = std::max(peak, now);
      std::ofstream("/proc/sys/vm/drop_caches") << "2\n";
      ++drops;
    }
  }
  const long end = rss_kib(m.pid());
  r.scalars["lookups"] = static_cast<double>(2 * cfg.scale);
  r.scalars["kernel cache drops during the lookups"] = drops;
  r.scalars["sealfs rss after lookups (MiB)"] = static_cast<double>(end) / mib;
  r.scalars["sealfs rss peak seen (MiB)"] = static_cast<double>(std::max(peak, end)) / mib;
  if (found != cfg.scale)
    throw std::runtime_error("scale: only " + std::to_string(found) + " entries visible");
}

// ---- output ---------------------------------------------------------------------

void print_table(const Results& r, const std::vector<Target>& targets, std::ostream& out) {
  std::vector<std::string> cols;
  for (const Target& t : targets) cols.push_back(t.name);
  out << std::left;
  char line[256];
  std::snprintf(line, sizeof line, "%-26s", "operation (median s)");
  out << line;
  for (const auto& c : cols) {
    std::snprintf(line, sizeof line, "%14s", c.c_str());
    out << line;
  }
  out << "   ratios to plain\n";
  for (const auto& op : r.op_order) {
    std::snprintf(line, sizeof line, "%-26s", op.c_str());
    out << line;
    for (const auto& c : cols) {
      auto it = r.samples.at(op).find(c);
      if (it == r.samples.at(op).end()) {
        std::snprintf(line, sizeof line, "%14s", "-");
      } else {
        std::snprintf(line, sizeof line, "%14.4f", median(it->second));
      }
      out << line;
    }
    const std::string base = op == "save" ? "plain+fsync" : "plain";
    const double b = r.med(op, base);
    out << "   ";
    for (const auto& c : cols) {
      if (c == "plain" || c == "plain+fsync" || b <= 0 || r.samples.at(op).count(c) == 0) continue;
      std::snprintf(line, sizeof line, "%s %.2fx  ", c.c_str(), r.med(op, c) / b);
      out << line;
    }
    if (op == "save") out << "(to plain+fsync)";
    out << "\n";
  }
  for (const auto& [k, v] : r.scalars) out << k << ": " << v << "\n";
}

void print_json(const Config& cfg, const Results& r, std::ostream& out) {
  out << "{\"entries\":" << cfg.entries << ",\"readdir_entries\":" << cfg.readdir_entries
      << ",\"runs\":" << cfg.runs << ",\"sealfs_options\":\"" << cfg.sealfs_options << "\",\"operations\":{";
  bool first_op = true;
  for (const auto& op : r.op_order) {
    out << (first_op ? "" : ",") << "\"" << op << "\":{";
    first_op = false;
    bool first_t = true;
    for (const auto& [t, v] : r.samples.at(op)) {
      out << (first_t ? "" : ",") << "\"" << t << "\":{\"median\":" << median(v) << ",\"samples\":[";
      first_t = false;
      for (std::size_t i = 0; i < v.size(); ++i) out << (i ? "," : "") << v[i];
      out << "]}";
    }
    out << "}";
  }
  out << "},\"scalars\":{";
  bool first = true;
  for (const auto& [k, v] : r.scalars) {
    out << (first ? "" : ",") << "\"" << k << "\":" << v;
    first = false;
  }
  out << "}}\n";
}

// The daemons inherit this process's limits; sealfs keeps an fd per inode
// the kernel holds, and the scale phase holds 2 per entry. Root may raise the
// hard limit too (as LimitNOFILE= in the systemd unit does).
void raise_fd_limit_for_daemons() {
  struct rlimit lim {};
  if (::getrlimit(RLIMIT_NOFILE, &lim) != 0) return;
  const rlim_t want = 1u << 20;
  if (lim.rlim_max < want) {
    struct rlimit more {
      want, want
    };
    if (::setrlimit(RLIMIT_NOFILE, &more) == 0) return;
  }
  lim.rlim_cur = lim.rlim_max;
  ::setrlimit(RLIMIT_NOFILE, &lim);
}

int run_bench(Config cfg) {
  raise_fd_limit_for_daemons();
  const Target sealfs{Kind::kSealfs, "sealfs", cfg.sealfs, cfg.sealfs_options};
  std::vector<Target> targets = {{Kind::kPlain, "plain", "", ""}, {Kind::kPlainFsync, "plain+fsync", "", ""}};
  if (cfg.with_bindfs) targets.push_back({Kind::kBindfs, "bindfs", cfg.bindfs, ""});
  if (cfg.with_floor) {
    targets.push_back({Kind::kFloor, "floor", cfg.fuse_floor, ""});
    targets.push_back({Kind::kFloorNoOpen, "floor-noopen", cfg.fuse_floor, ""});
  }
  targets.push_back(sealfs);
  for (const auto& v : cfg.variants) {
    const auto eq = v.find('=');
    if (eq == std::string::npos || eq == 0)
      throw std::runtime_error("--variant " + v + ": expected NAME=BINARY[|OPTIONS]");
    const auto bar = v.find('|', eq);
    targets.push_back({Kind::kSealfs, v.substr(0, eq),
                       v.substr(eq + 1, bar == std::string::npos ? bar : bar - eq - 1),
                       bar == std::string::npos ? cfg.sealfs_options : v.substr(bar + 1)});
  }
  if (!cfg.only.empty()) {
    std::erase_if(targets, [&](const Target& t) {
      return std::find(cfg.only.begin(), cfg.only.end(), t.name) == cfg.only.end();
    });
  }
  if (cfg.work.empty()) {
    char tmpl[] = "/var/tmp/sealfs-bench-XXXXXX";
    if (::mkdtemp(tmpl) == nullptr) die("mkdtemp");
    cfg.work = tmpl;
  }
  make_dirs(cfg.work);
  const EntryShape shape;
  const auto entries = make_entries(shape, cfg.entries);
  Results r;
  std::uint64_t checksum = 0;
  const fsys::path store = cfg.work / "store";
  std::cerr << "building the load store (" << cfg.entries << " entries, listing of " << cfg.readdir_entries
            << ") in " << cfg.work << "\n";
  build_load_store(cfg, sealfs, store, entries);
  for (int run = 0; run < cfg.runs; ++run) {
    std::cerr << "run " << run + 1 << "/" << cfg.runs << "\n";
    // Alternate: each run starts with a different target.
    std::vector<Target> order = targets;
    std::rotate(order.begin(), order.begin() + (run % static_cast<int>(order.size())), order.end());
    for (const Target& t : order) {
      // floor-noopen differs from floor only in opens: its saves would say nothing new.
      if (cfg.saves && t.kind != Kind::kFloorNoOpen) r.add("save", t, time_save(cfg, t, entries, run));
    }
    for (const Target& t : order) {
      if (!cfg.loads || t.kind == Kind::kPlainFsync) continue;  // loads are the same as plain's
      measure_loads(cfg, t, store, cfg.entries, r, checksum);
    }
  }
  if (cfg.scale > 0) scale_phase(cfg, r, targets, sealfs);
  const double lib_bytes = static_cast<double>(cfg.entries * shape.lib);
  r.scalars["cold load budget: plain + libs at 1.5 GB/s (s)"] =
      r.med("cold load", "plain") + lib_bytes / 1.5e9;
  if (r.med("save", "floor") > 0 && r.med("save", "plain") > 0 && r.med("save", "plain+fsync") > 0) {
    // fuse_floor does not fsync: what R1's fsyncs add on the plain directory,
    // added to the floor's save, is the least any durable FUSE layer can take.
    r.scalars["save floor with R1's fsyncs, estimated: floor + (plain+fsync - plain) (s)"] =
        r.med("save", "floor") + r.med("save", "plain+fsync") - r.med("save", "plain");
  }
  if (cfg.json) {
    print_json(cfg, r, std::cout);
  } else {
    std::cout << cfg.entries
              << " entries (24 KiB + 8 KiB sources, 512 KiB library, 300 B params), listing of "
              << cfg.readdir_entries << ", " << cfg.runs << " runs, sealfs -o " << cfg.sealfs_options << "\n";
    print_table(r, targets, std::cout);
  }
  std::cerr << "(checksum " << checksum << ")\n";
  remove_tree(cfg.work);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  Config cfg;
  CLI::App app{"sealfs kernel-cache benchmark: plain vs bindfs vs sealfs", "cache_bench"};
  std::string work;
  app.add_option("--entries", cfg.entries, "entries saved and loaded per run")->capture_default_str();
  app.add_option("--readdir-entries", cfg.readdir_entries, "entries in the listed kernels/")
      ->capture_default_str();
  app.add_option("--scale", cfg.scale, "entries of the mount-time and RSS store (0: skip)")
      ->capture_default_str();
  app.add_option("--runs", cfg.runs, "runs (medians are reported)")
      ->capture_default_str()
      ->check(CLI::Range(1, 100));
  app.add_option("--sealfs", cfg.sealfs, "the sealfs binary")->capture_default_str();
  app.add_option("--sealfs-options", cfg.sealfs_options, "sealfs -o list")->capture_default_str();
  app.add_option("--bindfs", cfg.bindfs, "the bindfs binary")->capture_default_str();
  app.add_flag("!--no-bindfs", cfg.with_bindfs, "leave bindfs out");
  app.add_option("--fuse-floor", cfg.fuse_floor, "the fuse_floor binary")->capture_default_str();
  app.add_flag(
      "!--no-floor", cfg.with_floor,
      "leave out the floor columns (fuse_floor: FUSE with no checks; -noopen: without OPEN/RELEASE)");
  app.add_option("--targets", cfg.only,
                 "run only these columns (plain, plain+fsync, bindfs, sealfs, variants)")
      ->delimiter(',');
  app.add_option("--variant", cfg.variants,
                 "NAME=BINARY[|OPTIONS]: one more sealfs column (another build, other -o options)");
  app.add_flag("!--no-saves", cfg.saves, "skip the save measurements");
  app.add_flag("!--no-loads", cfg.loads, "skip the load and readdir measurements");
  app.add_option("--work", work, "working directory (default: a new one under /var/tmp, removed at the end)");
  app.add_flag("--json", cfg.json, "print the results as JSON");
  CLI11_PARSE(app, argc, argv);
  cfg.work = work;
  // The smoke test (ctest -L bench) runs this with tiny sizes; where FUSE is
  // unusable it skips (77), except in CI, where that is a failure.
  if (::access("/dev/fuse", R_OK | W_OK) != 0) {
    const char* ci = std::getenv("CI");
    std::cerr << "cache_bench: /dev/fuse is not usable here: " << std::strerror(errno) << "\n";
    return ci != nullptr && std::string_view(ci) == "true" ? 1 : 77;
  }
  try {
    return run_bench(cfg);
  } catch (const std::exception& e) {
    std::cerr << "cache_bench: " << e.what() << "\n";
    return 1;
  }
}
