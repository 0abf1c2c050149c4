// Proof with unchanged programs, crashes and concurrency, on real mounts:
//  - writers SIGKILLed at random moments (a TileLang-protocol save, and an
//    in-place writer) leave every key a hit or a miss, never a corrupt load,
//    and the next save of the key works;
//  - many publishers of the same keys with readers loading all along: no
//    reader ever sees a torn entry, every key ends valid, the daemon's
//    memory stays flat;
//  - two daemons over one backing store: proof_two_daemons_test.cpp.
// The TileLang protocol is tests/scenarios/tilelang_protocol.py, driven either
// one command per process (tilelang()) or, where process start-up would
// dominate, imported by a small in-process loop (kDriver, proof_util.hpp).
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <map>
#include <random>

#include "tests/mount/mount_test_util.hpp"
#include "tests/mount/proof_util.hpp"

namespace sealfs::test {
namespace {

using namespace proof;  // the protocol driver shared by the proof tests

using std::chrono::milliseconds;
using Clock = std::chrono::steady_clock;

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

// Whatever is visible in dir is complete: a killed write never shows partly.
void expect_visible_files_complete(const InPlaceWriter& writer, const std::string& dir, int trial) {
  for (const auto& [name, data] : writer.files()) {
    const std::string path = dir + "/" + name;
    if (lstat_errno(path) == 0) {
      EXPECT_EQ(file_text(path), data) << "trial " << trial << ": " << name;
    }
  }
}

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
    expect_visible_files_complete(writer, dir, trial);
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

// Waits for every reader (each must exit 0), then every writer (likewise),
// and prints each one's summary line.
void wait_for_writers_and_readers(const std::vector<pid_t>& writers, const std::vector<pid_t>& readers,
                                  const TempDir& logs, std::chrono::seconds limit) {
  for (std::size_t r = 0; r < readers.size(); ++r) {
    EXPECT_EQ(wait_process(readers[r], limit), 0)
        << file_text(logs / ("reader" + std::to_string(r) + ".log"));
  }
  for (std::size_t w = 0; w < writers.size(); ++w) {
    const int status = wait_process(writers[w], limit);
    const std::string log = file_text(logs / ("writer" + std::to_string(w) + ".log"));
    EXPECT_EQ(status, 0) << log;
    std::printf("[ proof ] %s", log.c_str());
  }
  for (std::size_t r = 0; r < readers.size(); ++r) {
    std::printf("[ proof ] %s", file_text(logs / ("reader" + std::to_string(r) + ".log")).c_str());
  }
}

// Every key of every writer's namespace (g<N>) under m ends valid; the number
// of namespaces.
int check_every_namespace(const std::string& m, int keys) {
  int namespaces = 0;
  for (const auto& name : list_dir(m)) {
    if (name.size() < 2 || name[0] != 'g') continue;
    ++namespaces;
    ProcessResult checked = check_namespace(m, name);
    EXPECT_EQ(checked.status, 0) << checked.out << checked.err;
    EXPECT_NE(checked.out.find("{0: " + std::to_string(keys) + "}"), std::string::npos)
        << "not every key of " << name << " is a hit: " << checked.out;
  }
  return namespaces;
}

// The daemon's memory at the end is within 16 MiB of what it was at 25%.
void expect_rss_flat(std::uint64_t rss_quarter, std::uint64_t rss_end) {
#if defined(SEALFS_SANITIZER_THREAD)
  // TSan's runtime keeps a shadow and a history of every access, which grow
  // with the run's length whatever the daemon holds (22 MiB more over the
  // 10 s run in a measured run); the release build checks the daemon.
  (void)rss_quarter;
  (void)rss_end;
  std::printf("[ proof ] TSan build: RSS growth not checked (the runtime's shadow grows with the run)\n");
#elif defined(SEALFS_SANITIZER_ADDRESS)
  // ASan keeps freed memory in its quarantine (256 MiB by default), so the
  // daemon's RSS grows with allocation churn whatever it holds; in this build
  // LeakSanitizer checks for leaks at the daemon's exit instead.
  (void)rss_quarter;
  (void)rss_end;
  std::printf("[ proof ] ASan build: RSS growth not checked (LeakSanitizer runs at the daemon's exit)\n");
#else
  EXPECT_LT(rss_end, rss_quarter + 16 * 1024) << "daemon memory grew";
#endif
}

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
  wait_for_writers_and_readers(writers, readers, logs, std::chrono::seconds(seconds + 120));
  const std::uint64_t rss_end = vm_rss_kib(mount.daemon_pid());

  const int namespaces = check_every_namespace(m, kKeys);
  EXPECT_GT(namespaces, 0);
  const auto elapsed = std::chrono::duration<double>(Clock::now() - started).count();
  std::printf(
      "[ proof ] concurrency: %d s run, %d namespaces x %d keys, daemon VmRSS %llu KiB at 25%%, %llu KiB "
      "at end, %.1f s total\n",
      seconds, namespaces, kKeys, static_cast<unsigned long long>(rss_quarter),
      static_cast<unsigned long long>(rss_end), elapsed);
  ASSERT_GT(rss_quarter, 0u);
  expect_rss_flat(rss_quarter, rss_end);
}

}  // namespace
}  // namespace sealfs::test
