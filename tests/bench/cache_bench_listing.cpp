// cache_bench's listing phase: ls -la, find and du over a warm mount.
#include "tests/bench/cache_bench_listing.hpp"

#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>

#include <cerrno>
#include <stdexcept>
#include <string>
#include <vector>

#include "tests/bench/cache_bench_phases.hpp"

extern char** environ;

namespace sealfs::bench {

namespace {

struct Program {
  std::string op;  // the operation's name, without the entry count
  std::vector<std::string> argv;
};

std::vector<Program> programs(const fsys::path& dir) {
  return {{"ls -la", {"ls", "-la", dir.string()}},
          {"find -type f", {"find", dir.string(), "-type", "f"}},
          {"du -s", {"du", "-s", dir.string()}}};
}

// argv run to its end (searched in PATH), its output to /dev/null, as a shell's
// `argv >/dev/null 2>&1` would; anything but exit status 0 is an error.
void run_to_null(const std::vector<std::string>& argv) {
  posix_spawn_file_actions_t fa;
  ::posix_spawn_file_actions_init(&fa);
  ::posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
  ::posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", O_WRONLY, 0);
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_t pid = -1;
  const int err = ::posix_spawnp(&pid, args[0], &fa, nullptr, args.data(), environ);
  ::posix_spawn_file_actions_destroy(&fa);
  if (err != 0) {
    errno = err;
    die("spawn " + argv[0]);
  }
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) die("waitpid " + argv[0]);
  }
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    errno = 0;
    die(argv[0] + " " + argv.back() + " failed (status " + std::to_string(status) + ")");
  }
}

}  // namespace

fsys::path build_listing_store(const Config& cfg) {
  const fsys::path store = cfg.work / "listing";
  remove_tree(store);
  add_adopted_entries(cfg, store, kNs + "/kernels", cfg.list_entries);
  return store;
}

void measure_listing(const Config& cfg, const Target& t, const fsys::path& store, Results& r) {
  Mounted m(cfg, t, store, cfg.work / "mnt");
  const fsys::path dir = m.root() / kNs / "kernels";
  const std::size_t listed = list_dir(dir);
  if (listed != cfg.list_entries) {
    throw std::runtime_error(t.name + ": kernels/ lists " + std::to_string(listed) + " of " +
                             std::to_string(cfg.list_entries) + " entries");
  }
  const auto progs = programs(dir);
  for (const auto& p : progs) run_to_null(p.argv);  // the mount is warm from here on
  const std::string count = " (" + std::to_string(cfg.list_entries) + ")";
  for (const auto& p : progs) {
    const auto start = Clock::now();
    for (int i = 0; i < cfg.list_repeat; ++i) run_to_null(p.argv);
    r.add(p.op + count, t, seconds_since(start) / cfg.list_repeat);
  }
}

}  // namespace sealfs::bench
