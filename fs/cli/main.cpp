// The `sealfs` command line. The mount form has no subcommand word, as
// mount.fuse3 runs it: `sealfs BACKING MOUNTPOINT -o OPTS`.
#include <syslog.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <exception>
#include <iostream>
#include <new>
#include <string>
#include <vector>

#include "fs/cli/commands.hpp"
#include "fs/cli/options.hpp"
#include "fs/cli/version.hpp"
#include "fs/fuse/session.hpp"

namespace {

using sealfs::cli::MountOptions;

// Every -o list given, in order.
bool apply_lists(const std::vector<std::string>& lists, MountOptions& options) {
  for (const auto& list : lists) {
    if (auto s = sealfs::cli::apply_option_list(list, options); !s) {
      std::cerr << "sealfs: " << s.error().message << "\n";
      return false;
    }
  }
  return true;
}

// What the command line says, filled in by CLI11.
struct Parsed {
  MountOptions mount;  // the mount form
  std::vector<std::string> mount_lists;
  // fsck and adopt parse the same -o lists as a mount (FUSE's own options
  // are accepted and mean nothing there) and use the BackingOptions part.
  MountOptions offline;
  std::vector<std::string> offline_lists;
  bool repair = false;
  std::string key_file;  // --key-file: the same as -o key_file=
  bool resign = false;
  std::vector<std::string> adopt_paths;
  std::string status_mountpoint;
  std::string status_format = "json";
  std::string cuda_mode = "structural";
  std::string cuda_format = "text";
  bool cuda_verbose = false;
  std::vector<std::string> cuda_files;
  CLI::App* fsck = nullptr;
  CLI::App* adopt = nullptr;
  CLI::App* status = nullptr;
  CLI::App* cuda = nullptr;
};

void add_mount_form(CLI::App& app, Parsed& p) {
  app.add_flag("-f,--foreground", p.mount.foreground, "stay in the foreground");
  app.add_flag("-d,--debug", p.mount.debug, "FUSE debug output (implies -f)");
  app.add_option("-o", p.mount_lists,
                 "options: profile=, verify=, durability=, cache_timeout=, cuda_validate=, key_file=, "
                 "metrics_file=, metrics_interval=, and FUSE's own (allow_other, auto_unmount, …)")
      ->allow_extra_args(false);
  app.add_option("backing", p.mount.backing, "the backing directory B");
  app.add_option("mountpoint", p.mount.mountpoint, "where to mount (may be B itself)");
}

void add_subcommands(CLI::App& app, Parsed& p) {
  p.fsck = app.add_subcommand("fsck", "verify every entry of B offline");
  p.fsck->add_flag("--repair", p.repair, "quarantine invalid entries");
  p.fsck->add_option("-o", p.offline_lists, "profile=… and other sealfs options")->allow_extra_args(false);
  p.fsck->add_option("--key-file,--key", p.key_file, "key file: manifests must be signed by its keys");
  p.fsck->add_option("backing", p.offline.backing, "the backing directory B")->required();

  p.adopt = app.add_subcommand("adopt", "seal foreign content in B deliberately (trust on first use)");
  p.adopt->add_option("-o", p.offline_lists, "profile=… and other sealfs options")->allow_extra_args(false);
  p.adopt->add_option("--key-file,--key", p.key_file, "key file: what is adopted is signed by its first key");
  p.adopt->add_flag("--resign", p.resign,
                    "also re-sign, with the first key, entries whose manifest it did not sign (unsigned, "
                    "another key's, or not matching) when their files match the manifest");
  p.adopt->add_option("backing", p.offline.backing, "the backing directory B")->required();
  p.adopt->add_option("paths", p.adopt_paths, "paths relative to B (default: all foreign content)");

  p.status = app.add_subcommand("status", "live counters of a running mount");
  p.status->add_option("--format", p.status_format, "json (default) or prometheus");
  p.status->add_option("mountpoint", p.status_mountpoint, "the mount")->required();

  p.cuda = app.add_subcommand("cuda-check", "validate CUDA images in .so/.cubin/.fatbin/.ptx files");
  p.cuda->add_option("--mode", p.cuda_mode, "structural (default) or driver");
  p.cuda->add_option("--format", p.cuda_format, "text (default) or json");
  p.cuda->add_flag("-v,--verbose", p.cuda_verbose, "list every image rather than a count per architecture");
  p.cuda->add_option("files", p.cuda_files, "files to check")->required();
}

// The offline commands' options: the -o lists, then --key-file.
bool apply_offline(Parsed& p) {
  if (!apply_lists(p.offline_lists, p.offline)) return false;
  if (!p.key_file.empty()) p.offline.key_file = p.key_file;
  return true;
}

// The command chosen, run; its exit status.
int dispatch(Parsed& p) {
  if (*p.fsck) {
    if (!apply_offline(p)) return 8;
    return sealfs::cli::run_fsck(p.offline, p.repair, std::cout, std::cerr, ::isatty(STDERR_FILENO) != 0);
  }
  if (*p.adopt) {
    if (!apply_offline(p)) return 1;
    return sealfs::cli::run_adopt(p.offline, p.adopt_paths, p.resign, std::cout, std::cerr,
                                  ::isatty(STDERR_FILENO) != 0);
  }
  if (*p.status) return sealfs::cli::run_status(p.status_mountpoint, p.status_format, std::cout, std::cerr);
  if (*p.cuda)
    return sealfs::cli::run_cuda_check(p.cuda_files, p.cuda_mode, std::cout, std::cerr,
                                       {.format = p.cuda_format, .verbose = p.cuda_verbose});

  if (p.mount.backing.empty() || p.mount.mountpoint.empty()) {
    std::cerr << "sealfs: usage: sealfs [-f] [-d] [-o OPT[,OPT...]] BACKING MOUNTPOINT (see sealfs --help)\n";
    return 1;
  }
  if (sealfs::cli::is_remount(p.mount_lists))
    return sealfs::cli::run_remount(p.mount.mountpoint, p.mount_lists, std::cerr);
  if (!apply_lists(p.mount_lists, p.mount)) return 1;
  // An override (dev, suid: mount.fuse3 adds them to every root mount) is
  // no error, and standard error stays quiet for it: scripts and test
  // suites (xfstests) compare every mount's output. Syslog says it, and -d.
  for (const auto& note : p.mount.notes) {
    ::syslog(LOG_INFO, "sealfs: %s", note.c_str());
    if (p.mount.debug) std::cerr << "sealfs: " << note << "\n";
  }
  auto config = sealfs::cli::mount_config(p.mount);
  if (!config) {
    std::cerr << "sealfs: " << config.error().message << "\n";
    return 1;
  }
  return sealfs::fuse::run_mount(*config, std::cerr);
}

int run(int argc, char** argv) {
  CLI::App app{"sealfs: a FUSE filesystem that shows only cache entries whose manifest verifies", "sealfs"};
  app.require_subcommand(0, 1);
  app.set_version_flag("--version", sealfs::cli::version_text,
                       "print the version, the commit built from, and the libfuse and OpenSSL linked");
  Parsed parsed;
  add_mount_form(app, parsed);
  add_subcommands(app, parsed);
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    std::cerr << "sealfs: " << e.what() << "\n";
    return 1;
  }
  return dispatch(parsed);
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
