// Proof with unchanged programs, crashes and concurrency, on real mounts:
//  - writers SIGKILLed at random moments (a TileLang-protocol save, and an
//    in-place writer) leave every key a hit or a miss, never a corrupt load,
//    and the next save of the key works;
//  - many publishers of the same keys with readers loading all along: no
//    reader ever sees a torn entry, every key ends valid, the daemon's
//    memory stays flat;
//  - two daemons over one backing store (two hosts sharing an NFS cache):
//    publishes and damage are seen by both, racing publishes leave one entry.
// The TileLang protocol is tests/scenarios/tilelang_protocol.py, driven either
// one command per process (tilelang()) or, where process start-up would
// dominate, imported by a small in-process loop (kDriver below).
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <map>
#include <random>

#include "tests/mount/mount_test_util.hpp"

namespace sealfs::test {
namespace {

using std::chrono::milliseconds;
using Clock = std::chrono::steady_clock;

constexpr int kLost = 2;  // save: another writer published first

// Loops over the protocol script's own save/load (imported, not copied):
//   check  CACHE NS            load every key listed under NS/kernels; exit 4 if any is corrupt
//   writer CACHE ID KEYS SECS  save KEYS keys (same order in every writer) in namespace g<N>,
//                              N = 0, 1, … until SECS pass; the started namespace is finished
//   reader CACHE SECS          load random listed keys of random namespaces until SECS pass;
//                              exit 4 at the first corrupt load
// The script's own prints go to /dev/null; each role prints one summary line.
constexpr const char* kDriver = R"PY(
import contextlib, importlib.util, os, random, sys, time
sys.dont_write_bytecode = True
spec = importlib.util.spec_from_file_location("tl", os.environ["SEALFS_TILELANG_PROTOCOL"])
tl = importlib.util.module_from_spec(spec)
spec.loader.exec_module(tl)
role, cache = sys.argv[1], sys.argv[2]
quiet = open(os.devnull, "w")

def listed(path):
    try:
        return sorted(os.listdir(path))
    except OSError:
        return []

if role == "check":
    ns = sys.argv[3]
    counts, corrupt = {}, []
    for key in listed(os.path.join(cache, ns, "kernels")):
        with contextlib.redirect_stdout(quiet):
            rc = tl.load(cache, ns, key)
        counts[rc] = counts.get(rc, 0) + 1
        if rc == tl.EXIT_CORRUPT:
            corrupt.append(key)
    print(f"check {ns}: {counts} corrupt={corrupt}")
    sys.exit(tl.EXIT_CORRUPT if corrupt else 0)

if role == "writer":
    ident, nkeys, seconds = sys.argv[3], int(sys.argv[4]), float(sys.argv[5])
    deadline = time.monotonic() + seconds
    counts, gen = {}, 0
    while True:
        for i in range(nkeys):
            try:
                with contextlib.redirect_stdout(quiet):
                    rc = tl.save(cache, f"g{gen}", f"key{i}", f"w{ident}", 4096 + 512 * int(ident))
            except OSError as e:
                rc = f"error {e}"
            counts[rc] = counts.get(rc, 0) + 1
        gen += 1
        if time.monotonic() >= deadline:
            break
    print(f"writer {ident}: namespaces={gen} {counts}")
    sys.exit(0 if all(isinstance(k, int) for k in counts) else 1)

if role == "reader":
    seconds = float(sys.argv[3])
    deadline = time.monotonic() + seconds
    rng = random.Random(os.getpid())
    counts = {}
    while time.monotonic() < deadline:
        spaces = [d for d in listed(cache) if d != "tmp" and not d.startswith(".")]
        ns = rng.choice(spaces) if spaces else ""
        keys = listed(os.path.join(cache, ns, "kernels")) if spaces else []
        if not keys:
            time.sleep(0.01)
            continue
        key = rng.choice(keys)
        with contextlib.redirect_stdout(quiet):
            rc = tl.load(cache, ns, key)
        counts[rc] = counts.get(rc, 0) + 1
        if rc == tl.EXIT_CORRUPT:
            print(f"reader: corrupt load of {ns}/{key}: {counts}")
            sys.exit(tl.EXIT_CORRUPT)
    print(f"reader: {counts}")
    sys.exit(0)
sys.exit(1)
)PY";

std::vector<std::string> driver_argv(std::vector<std::string> args) {
  std::vector<std::string> argv = {std::getenv("SEALFS_PYTHON"), "-c", kDriver};
  argv.insert(argv.end(), args.begin(), args.end());
  return argv;
}

const std::vector<std::string> kPythonEnv = {"PYTHONDONTWRITEBYTECODE=1"};

ProcessResult check_namespace(const std::string& cache, const std::string& ns) {
  return run_process(driver_argv({"check", cache, ns}), kPythonEnv);
}

std::vector<std::string> save_argv(const std::string& cache, const std::string& key,
                                   std::vector<std::string> extra = {}) {
  std::vector<std::string> argv = {std::getenv("SEALFS_PYTHON"), std::getenv("SEALFS_TILELANG_PROTOCOL"),
                                   "save", cache, key};
  argv.insert(argv.end(), extra.begin(), extra.end());
  return argv;
}

std::string file_text(const std::string& path) { return read_file(path).value_or("<unreadable>"); }

// A hit stays a hit (the save then loses to the entry in place); a miss is
// repaired by the usual "rmtree the broken dir, save" path. Either way the
// key loads as a hit afterwards.
void expect_next_save_repairs(const std::string& cache, const std::string& ns, const std::string& key,
                              int load_status, std::vector<std::string> save_extra = {}) {
  const std::string entry = cache + "/" + ns + "/kernels/" + key;
  if (load_status == kMiss) {
    EXPECT_TRUE(remove_tree(entry) || lstat_errno(entry) == ENOENT) << entry;
  }
  save_extra.insert(save_extra.end(), {"--ns", ns});
  ProcessResult saved = run_process(save_argv(cache, key, save_extra), kPythonEnv);
  if (load_status == kHit) {
    EXPECT_TRUE(saved.status == 0 || saved.status == kLost) << key << ": " << saved.out << saved.err;
  } else {
    EXPECT_EQ(saved.status, 0) << key << ": " << saved.out << saved.err;
  }
  ProcessResult loaded = tilelang("load", cache, key, {"--ns", ns});
  EXPECT_EQ(loaded.status, kHit) << key << ": " << loaded.out << loaded.err;
}

std::uint64_t vm_rss_kib(pid_t pid) {
  std::ifstream status("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("VmRSS:", 0) == 0) return std::stoull(line.substr(6));
  }
  return 0;
}

int int_from_env(const char* name, int fallback) {
  const char* value = std::getenv(name);
  return value && *value ? std::atoi(value) : fallback;
}

// ---------------------------------------------------------------- writer kills

// SEALFS_PROOF_KILL_TRIALS: fewer under the TSan preset, where each trial is
// several times slower.
int kill_trials() { return std::max(1, int_from_env("SEALFS_PROOF_KILL_TRIALS", 50)); }

TEST(WriterKill, TileLangSaveKilledAtRandomLeavesHitOrMiss) {
  SEALFS_REQUIRE_FUSE();
  Mount mount(MountConfig::with({"profile=tilelang"}));
  ASSERT_TRUE(mount.ok()) << mount.error();
  const std::string m = mount.mountpoint();

  // One complete save sets the kill window: 0 .. its duration.
  const auto started = Clock::now();
  ASSERT_EQ(tilelang("save", m, "warmup").status, 0);
  const auto window_ms =
      std::max<long>(1, std::chrono::duration_cast<milliseconds>(Clock::now() - started).count());

  std::mt19937 rng(std::random_device{}());
  std::uniform_int_distribution<long> delay(0, window_ms);
  TempDir logs("sealfs-proof-kill");
  std::map<int, int> outcomes;  // load status after the kill → trials
  int killed_running = 0;
  const auto run_started = Clock::now();
  const int trials = kill_trials();
  for (int trial = 0; trial < trials; ++trial) {
    const std::string key = "k" + std::to_string(trial);
    const pid_t pid = spawn_process(save_argv(m, key), logs / (key + ".log"), kPythonEnv);
    ASSERT_GT(pid, 0);
    std::this_thread::sleep_for(milliseconds(delay(rng)));
    if (::kill(pid, SIGKILL) == 0) {
      const int status = wait_process(pid, std::chrono::seconds(30));
      if (status == 128 + SIGKILL) ++killed_running;
    }
    ProcessResult loaded = tilelang("load", m, key);
    ASSERT_TRUE(loaded.status == kHit || loaded.status == kMiss)
        << "trial " << trial << ": " << loaded.status << " " << loaded.out << loaded.err;
    ++outcomes[loaded.status];
    ProcessResult all = check_namespace(m, "ns");
    ASSERT_EQ(all.status, 0) << "trial " << trial << ": " << all.out << all.err;
    expect_next_save_repairs(m, "ns", key, loaded.status);
  }
  const auto seconds = std::chrono::duration<double>(Clock::now() - run_started).count();
  std::printf(
      "[ proof ] save kills: %d trials (%d killed while running, window %ld ms): %d hit, %d miss, %.1f s\n",
      trials, killed_running, window_ms, outcomes[kHit], outcomes[kMiss], seconds);
  EXPECT_EQ(outcomes[kHit] + outcomes[kMiss], trials);
}

// The four files of a TileLang entry written in place through M, params.pkl
// last, in small chunks: the bytes come from a reference save into a plain
// directory, so a complete in-place entry loads as a hit.
class InPlaceWriter {
 public:
  explicit InPlaceWriter(const std::string& reference_entry) {
    for (const char* name : {"device_kernel.cu", "host_kernel.cu", "kernel_lib.so", "params.pkl"}) {
      files_.emplace_back(name, file_text(reference_entry + "/" + name));
    }
  }
  const std::vector<std::pair<std::string, std::string>>& files() const { return files_; }

  // In a forked child: write every file into dir, then _exit(0). Only
  // open/write/close/nanosleep, so it is safe after fork.
  [[noreturn]] void write_and_exit(const std::string& dir) const {
    constexpr std::size_t kChunk = 2048;
    const timespec gap{0, 200'000};
    for (const auto& [name, data] : files_) {
      const std::string path = dir + "/" + name;
      const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0644);
      if (fd < 0) ::_exit(10);
      for (std::size_t off = 0; off < data.size(); off += kChunk) {
        const std::size_t n = std::min(kChunk, data.size() - off);
        if (::write(fd, data.data() + off, n) != static_cast<ssize_t>(n)) ::_exit(11);
        ::nanosleep(&gap, nullptr);
      }
      if (::close(fd) != 0) ::_exit(12);
    }
    ::_exit(0);
  }

 private:
  std::vector<std::pair<std::string, std::string>> files_;
};

// Found an R4 bug when first written: a writer SIGKILLed right after
// open(O_CREAT|O_TRUNC) could leave an empty file visible and sealed (about 3
// of 50 trials) because its handle was released without a FLUSH and counted
// as a normal close. Such handles are now abandoned (fs/fuse/filesystem.hpp).
TEST(WriterKill, InPlaceWriterKilledAtRandomLeavesHitOrMiss) {
  SEALFS_REQUIRE_FUSE();
  constexpr const char* kLibSize = "65536";
  TempDir reference("sealfs-proof-ref");
  ASSERT_EQ(tilelang("save", reference.path(), "k", {"--lib-size", kLibSize}).status, 0);
  const InPlaceWriter writer(reference / "ns/kernels/k");

  Mount mount(MountConfig::with({"profile=tilelang"}));
  ASSERT_TRUE(mount.ok()) << mount.error();
  const std::string m = mount.mountpoint();

  // One uninterrupted write sets the kill window.
  make_dirs(mount.m("warmup/kernels/k"));
  auto started = Clock::now();
  const pid_t warm = ::fork();
  ASSERT_GE(warm, 0);
  if (warm == 0) writer.write_and_exit(mount.m("warmup/kernels/k"));
  ASSERT_EQ(wait_process(warm, std::chrono::seconds(30)), 0);
  const auto window_ms =
      std::max<long>(1, std::chrono::duration_cast<milliseconds>(Clock::now() - started).count());
  ASSERT_EQ(tilelang("load", m, "k", {"--ns", "warmup"}).status, kHit);

  std::mt19937 rng(std::random_device{}());
  std::uniform_int_distribution<long> delay(0, window_ms);
  std::map<int, int> outcomes;
  int killed_running = 0;
  const auto run_started = Clock::now();
  const int trials = kill_trials();
  for (int trial = 0; trial < trials; ++trial) {
    const std::string ns = "ip" + std::to_string(trial);
    const std::string dir = mount.m(ns + "/kernels/k");
    make_dirs(dir);
    const pid_t pid = ::fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) writer.write_and_exit(dir);
    std::this_thread::sleep_for(milliseconds(delay(rng)));
    ::kill(pid, SIGKILL);
    const int status = wait_process(pid, std::chrono::seconds(30));
    ASSERT_TRUE(status == 0 || status == 128 + SIGKILL) << "writer status " << status;
    if (status != 0) ++killed_running;

    ProcessResult loaded = tilelang("load", m, "k", {"--ns", ns});
    ASSERT_TRUE(loaded.status == kHit || loaded.status == kMiss)
        << "trial " << trial << ": " << loaded.status << " " << loaded.out << loaded.err;
    ++outcomes[loaded.status];
    // Whatever is visible is complete: a killed write never shows partly.
    for (const auto& [name, data] : writer.files()) {
      const std::string path = dir + "/" + name;
      if (lstat_errno(path) == 0) {
        EXPECT_EQ(file_text(path), data) << "trial " << trial << ": " << name;
      }
    }
    if (status == 0) {
      EXPECT_EQ(loaded.status, kHit) << "trial " << trial << ": the writer finished";
    }
    expect_next_save_repairs(m, ns, "k", loaded.status, {"--lib-size", kLibSize});
  }
  const auto seconds = std::chrono::duration<double>(Clock::now() - run_started).count();
  std::printf(
      "[ proof ] in-place kills: %d trials (%d killed while running, window %ld ms): %d hit, %d miss, "
      "%.1f s\n",
      trials, killed_running, window_ms, outcomes[kHit], outcomes[kMiss], seconds);
  EXPECT_EQ(outcomes[kHit] + outcomes[kMiss], trials);
  EXPECT_GT(killed_running, 0) << "no trial interrupted a write";
}

// ---------------------------------------------------------------- concurrency

TEST(Concurrency, PublishersAndReadersNeverSeeATornEntry) {
  SEALFS_REQUIRE_FUSE();
  constexpr int kWriters = 8;
  constexpr int kReaders = 4;
  constexpr int kKeys = 50;
  const int seconds = std::max(1, int_from_env("SEALFS_PROOF_SECONDS", 30));

  Mount mount(MountConfig::with({"profile=tilelang"}));
  ASSERT_TRUE(mount.ok()) << mount.error();
  const std::string m = mount.mountpoint();
  TempDir logs("sealfs-proof-conc");

  const auto started = Clock::now();
  std::vector<pid_t> writers;
  std::vector<pid_t> readers;
  for (int w = 0; w < kWriters; ++w) {
    writers.push_back(spawn_process(
        driver_argv({"writer", m, std::to_string(w), std::to_string(kKeys), std::to_string(seconds)}),
        logs / ("writer" + std::to_string(w) + ".log"), kPythonEnv));
    ASSERT_GT(writers.back(), 0);
  }
  for (int r = 0; r < kReaders; ++r) {
    readers.push_back(spawn_process(driver_argv({"reader", m, std::to_string(seconds)}),
                                    logs / ("reader" + std::to_string(r) + ".log"), kPythonEnv));
    ASSERT_GT(readers.back(), 0);
  }

  std::this_thread::sleep_for(milliseconds(seconds * 1000 / 4));
  const std::uint64_t rss_quarter = vm_rss_kib(mount.daemon_pid());

  // Writers finish the namespace they started after the deadline.
  const auto limit = std::chrono::seconds(seconds + 120);
  for (int r = 0; r < kReaders; ++r) {
    EXPECT_EQ(wait_process(readers[r], limit), 0)
        << file_text(logs / ("reader" + std::to_string(r) + ".log"));
  }
  int namespaces = 0;
  for (int w = 0; w < kWriters; ++w) {
    const int status = wait_process(writers[w], limit);
    const std::string log = file_text(logs / ("writer" + std::to_string(w) + ".log"));
    EXPECT_EQ(status, 0) << log;
    std::printf("[ proof ] %s", log.c_str());
  }
  for (int r = 0; r < kReaders; ++r) {
    std::printf("[ proof ] %s", file_text(logs / ("reader" + std::to_string(r) + ".log")).c_str());
  }
  const std::uint64_t rss_end = vm_rss_kib(mount.daemon_pid());

  // Every key of every namespace ends valid.
  for (const auto& name : list_dir(m)) {
    if (name.size() < 2 || name[0] != 'g') continue;
    ++namespaces;
    ProcessResult checked = check_namespace(m, name);
    EXPECT_EQ(checked.status, 0) << checked.out << checked.err;
    EXPECT_NE(checked.out.find("{0: " + std::to_string(kKeys) + "}"), std::string::npos)
        << "not every key of " << name << " is a hit: " << checked.out;
  }
  EXPECT_GT(namespaces, 0);
  const auto elapsed = std::chrono::duration<double>(Clock::now() - started).count();
  std::printf(
      "[ proof ] concurrency: %d s run, %d namespaces x %d keys, daemon VmRSS %llu KiB at 25%%, %llu KiB "
      "at end, %.1f s total\n",
      seconds, namespaces, kKeys, static_cast<unsigned long long>(rss_quarter),
      static_cast<unsigned long long>(rss_end), elapsed);
  ASSERT_GT(rss_quarter, 0u);
#if defined(__SANITIZE_ADDRESS__)
  // ASan keeps freed memory in its quarantine (256 MiB by default), so the
  // daemon's RSS grows with allocation churn whatever it holds; in this build
  // LeakSanitizer checks for leaks at the daemon's exit instead.
  std::printf("[ proof ] ASan build: RSS growth not checked (LeakSanitizer runs at the daemon's exit)\n");
#else
  EXPECT_LT(rss_end, rss_quarter + 16 * 1024) << "daemon memory grew";
#endif
}

// ---------------------------------------------------------------- two daemons

class TwoDaemons : public ::testing::Test {
 protected:
  void SetUp() override {
    SEALFS_REQUIRE_FUSE();
    make_dirs(dir_ / "B");
    a_ = std::make_unique<Mount>(
        MountConfig::with({"profile=tilelang,cache_timeout=0"}).backed_by(dir_ / "B"));
    ASSERT_TRUE(a_->ok()) << a_->error();
    b_ = std::make_unique<Mount>(
        MountConfig::with({"profile=tilelang,cache_timeout=0"}).backed_by(dir_ / "B"));
    ASSERT_TRUE(b_->ok()) << b_->error();
  }
  std::size_t quarantined_libs() const {
    const auto files = quarantined_files(*a_);
    return static_cast<std::size_t>(std::count_if(files.begin(), files.end(), [](const std::string& p) {
      return p.find("kernel_lib.so") != std::string::npos;
    }));
  }

  TempDir dir_{"sealfs-proof-two"};
  std::unique_ptr<Mount> a_;
  std::unique_ptr<Mount> b_;
};

TEST_F(TwoDaemons, PublishThroughOneIsValidThroughTheOther) {
  ProcessResult saved = tilelang("save", a_->mountpoint(), "k");
  ASSERT_EQ(saved.status, 0) << saved.out << saved.err;
  ProcessResult loaded = tilelang("load", b_->mountpoint(), "k");
  EXPECT_EQ(loaded.status, kHit) << loaded.out << loaded.err;
  EXPECT_TRUE(list_dir(b_->m("ns/kernels")).count("k"));

  ProcessResult other = tilelang("save", b_->mountpoint(), "k2", {"--variant", "v2"});
  ASSERT_EQ(other.status, 0) << other.out << other.err;
  EXPECT_EQ(tilelang("load", a_->mountpoint(), "k2").status, kHit);
}

TEST_F(TwoDaemons, DamageNoticedByOneIsAMissOnBothAndQuarantinedOnce) {
  ASSERT_EQ(tilelang("save", a_->mountpoint(), "k").status, 0);
  ASSERT_EQ(tilelang("load", b_->mountpoint(), "k").status, kHit);
  ASSERT_EQ(::truncate(a_->b("ns/kernels/k/kernel_lib.so").c_str(), 100), 0);

  ProcessResult through_a = tilelang("load", a_->mountpoint(), "k");
  EXPECT_EQ(through_a.status, kMiss) << through_a.out;
  ProcessResult through_b = tilelang("load", b_->mountpoint(), "k");
  EXPECT_EQ(through_b.status, kMiss) << through_b.out;
  EXPECT_EQ(lstat_errno(b_->m("ns/kernels/k")), ENOENT);
  EXPECT_EQ(lstat_errno(a_->m("ns/kernels/k")), ENOENT);
  EXPECT_EQ(quarantined_libs(), 1u);

  // Both notice at once: still one quarantined copy more, and a miss on both.
  ASSERT_EQ(tilelang("save", b_->mountpoint(), "k").status, 0);
  ASSERT_EQ(tilelang("load", a_->mountpoint(), "k").status, kHit);
  write_file(a_->b("ns/kernels/k/kernel_lib.so"), std::string(4096, '\0'));
  TempDir logs("sealfs-proof-two-logs");
  const pid_t pa = spawn_process(
      {std::getenv("SEALFS_PYTHON"), std::getenv("SEALFS_TILELANG_PROTOCOL"), "load", a_->mountpoint(), "k"},
      logs / "a.log", kPythonEnv);
  const pid_t pb = spawn_process(
      {std::getenv("SEALFS_PYTHON"), std::getenv("SEALFS_TILELANG_PROTOCOL"), "load", b_->mountpoint(), "k"},
      logs / "b.log", kPythonEnv);
  EXPECT_EQ(wait_process(pa, std::chrono::seconds(30)), kMiss) << file_text(logs / "a.log");
  EXPECT_EQ(wait_process(pb, std::chrono::seconds(30)), kMiss) << file_text(logs / "b.log");
  EXPECT_EQ(quarantined_libs(), 2u);

  ProcessResult repaired = tilelang("save", a_->mountpoint(), "k");
  EXPECT_EQ(repaired.status, 0) << repaired.out << repaired.err;
  EXPECT_EQ(tilelang("load", b_->mountpoint(), "k").status, kHit);
}

TEST_F(TwoDaemons, RacingPublishesThroughBothLeaveOneValidEntry) {
  constexpr int kRounds = 5;
  constexpr int kPerSide = 3;
  TempDir logs("sealfs-proof-race");
  const pid_t reader =
      spawn_process(driver_argv({"reader", b_->mountpoint(), "8"}), logs / "reader.log", kPythonEnv);
  ASSERT_GT(reader, 0);
  for (int round = 0; round < kRounds; ++round) {
    const std::string key = "race" + std::to_string(round);
    std::vector<pid_t> savers;
    for (int i = 0; i < 2 * kPerSide; ++i) {
      const Mount& side = i % 2 == 0 ? *a_ : *b_;
      savers.push_back(
          spawn_process(save_argv(side.mountpoint(), key, {"--variant", "v" + std::to_string(i)}),
                        logs / (key + "_" + std::to_string(i) + ".log"), kPythonEnv));
      ASSERT_GT(savers.back(), 0);
    }
    int won = 0;
    for (std::size_t i = 0; i < savers.size(); ++i) {
      const int status = wait_process(savers[i], std::chrono::seconds(60));
      EXPECT_TRUE(status == 0 || status == kLost)
          << key << " saver " << i << ": " << status << " "
          << file_text(logs / (key + "_" + std::to_string(i) + ".log"));
      if (status == 0) ++won;
    }
    EXPECT_EQ(won, 1) << key;
    EXPECT_EQ(tilelang("load", a_->mountpoint(), key).status, kHit) << key;
    EXPECT_EQ(tilelang("load", b_->mountpoint(), key).status, kHit) << key;
    const auto in_b = list_dir(a_->b("ns/kernels/" + key));
    EXPECT_EQ(in_b, (std::set<std::string>{".", "..", ".sealfs-manifest", "device_kernel.cu",
                                           "host_kernel.cu", "kernel_lib.so", "params.pkl"}))
        << key;
  }
  EXPECT_EQ(wait_process(reader, std::chrono::seconds(60)), 0) << file_text(logs / "reader.log");
  std::printf("[ proof ] two daemons race: %d rounds x %d savers; %s", kRounds, 2 * kPerSide,
              file_text(logs / "reader.log").c_str());
}

}  // namespace
}  // namespace sealfs::test
