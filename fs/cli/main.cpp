// The `sealfs` command line. The mount form has no subcommand word, as
// mount.fuse3 runs it: `sealfs BACKING MOUNTPOINT -o OPTS`.
#include <CLI/CLI.hpp>
#include <iostream>
#include <new>
#include <string>
#include <vector>

#include "core/cuda/cuda.hpp"
#include "fs/cli/commands.hpp"
#include "fs/cli/options.hpp"
#include "fs/fuse/session.hpp"

namespace {

using sealfs::fs::MountOptions;

// Every -o list given, in order.
bool apply_lists(const std::vector<std::string>& lists, MountOptions& options) {
  for (const auto& list : lists) {
    if (auto s = sealfs::fs::apply_option_list(list, options); !s) {
      std::cerr << "sealfs: " << s.error().message << "\n";
      return false;
    }
  }
  return true;
}

int run(int argc, char** argv) {
  CLI::App app{"sealfs: a FUSE filesystem that shows only cache entries whose manifest verifies", "sealfs"};
  app.require_subcommand(0, 1);

  MountOptions mount;
  std::vector<std::string> mount_lists;
  app.add_flag("-f,--foreground", mount.foreground, "stay in the foreground");
  app.add_flag("-d,--debug", mount.debug, "FUSE debug output (implies -f)");
  app.add_option("-o", mount_lists,
                 "options: profile=, verify=, durability=, cache_timeout=, cuda_validate=, "
                 "and FUSE's own (allow_other, auto_unmount, …)")
      ->allow_extra_args(false);
  app.add_option("backing", mount.backing, "the backing directory B");
  app.add_option("mountpoint", mount.mountpoint, "where to mount (may be B itself)");

  MountOptions fsck_options;
  std::vector<std::string> fsck_lists;
  bool repair = false;
  auto* fsck = app.add_subcommand("fsck", "verify every entry of B offline");
  fsck->add_flag("--repair", repair, "quarantine invalid entries");
  fsck->add_option("-o", fsck_lists, "profile=… and other sealfs options")->allow_extra_args(false);
  fsck->add_option("backing", fsck_options.backing, "the backing directory B")->required();

  MountOptions adopt_options;
  std::vector<std::string> adopt_lists;
  std::vector<std::string> adopt_paths;
  auto* adopt = app.add_subcommand("adopt", "seal foreign content in B deliberately (trust on first use)");
  adopt->add_option("-o", adopt_lists, "profile=… and other sealfs options")->allow_extra_args(false);
  adopt->add_option("backing", adopt_options.backing, "the backing directory B")->required();
  adopt->add_option("paths", adopt_paths, "paths relative to B (default: all foreign content)");

  std::string status_mountpoint;
  auto* status = app.add_subcommand("status", "live counters of a running mount");
  status->add_option("mountpoint", status_mountpoint, "the mount")->required();

  std::string cuda_mode = "structural";
  std::vector<std::string> cuda_files;
  auto* cuda = app.add_subcommand("cuda-check", "validate CUDA images in .so/.cubin/.fatbin/.ptx files");
  cuda->add_option("--mode", cuda_mode, "structural (default) or driver");
  cuda->add_option("files", cuda_files, "files to check")->required();

  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    std::cerr << "sealfs: " << e.what() << "\n";
    return 1;
  }

  if (*fsck) {
    if (!apply_lists(fsck_lists, fsck_options)) return 8;
    return sealfs::fs::run_fsck(fsck_options, repair, std::cout, std::cerr);
  }
  if (*adopt) {
    if (!apply_lists(adopt_lists, adopt_options)) return 1;
    return sealfs::fs::run_adopt(adopt_options, adopt_paths, std::cout, std::cerr);
  }
  if (*status) return sealfs::fs::run_status(status_mountpoint, std::cout, std::cerr);
  if (*cuda) return sealfs::run_cuda_check(cuda_files, cuda_mode, std::cout, std::cerr);

  if (mount.backing.empty() || mount.mountpoint.empty()) {
    std::cerr << "sealfs: usage: sealfs [-f] [-d] [-o OPT[,OPT...]] BACKING MOUNTPOINT (see sealfs --help)\n";
    return 1;
  }
  if (!apply_lists(mount_lists, mount)) return 1;
  if (mount.debug) mount.foreground = true;
  return sealfs::fs::run_mount(mount, std::cerr);
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const std::bad_alloc&) {
    std::cerr << "sealfs: out of memory\n";
  } catch (const std::exception& e) {
    std::cerr << "sealfs: " << e.what() << "\n";
  }
  return 1;
}
