// The `sealfs` subcommands other than mount, one file each (fsck.cpp,
// adopt.cpp, status.cpp, cuda_check.cpp). Each returns the process exit
// status and writes results to out, problems (one line each) to err.
#pragma once

#include <memory>
#include <ostream>
#include <string>
#include <string_view>
#include <vector>

#include "core/base/result.hpp"
#include "core/store/store.hpp"
#include "fs/cli/options.hpp"

namespace sealfs::cli {

// `sealfs status [--format=json|prometheus] MOUNTPOINT`: the live counters
// of a running mount, as the daemon's JSON (the default) or in Prometheus'
// text format. 0 printed, 1 no status (not a sealfs mount…), 2 a bad format.
int run_status(const std::string& mountpoint, std::string_view format, std::ostream& out, std::ostream& err);

// `sealfs fsck [--repair] BACKING`: 0 all entries valid, 1 invalid entries
// were found and quarantined (--repair) or, nothing worse found, the
// quarantine took something since the last fsck, 4 invalid entries left in
// place, 8 the check itself failed. The progress goes to err (progress_line.hpp):
// rewritten in place while err_is_terminal, and one summary line at the end.
int run_fsck(const BackingOptions& options, bool repair, std::ostream& out, std::ostream& err,
             bool err_is_terminal = false);

// `sealfs adopt [--resign] BACKING [PATH…]`: seal foreign content
// deliberately; resign (needs a key file): re-sign entries that its first
// key did not sign, where their files match their manifest. Its progress as
// fsck's.
int run_adopt(const BackingOptions& options, const std::vector<std::string>& paths, bool resign,
              std::ostream& out, std::ostream& err, bool err_is_terminal = false);

// How `sealfs cuda-check` reports: format "text" (default) or "json";
// verbose lists every image rather than counting them per architecture.
struct CudaCheckReport {
  std::string_view format = "text";
  bool verbose = false;
};

// `sealfs cuda-check FILE…`: per file on out, a summary (verdict, images
// counted per architecture and kind, the first problem found), every image
// with verbose; "json": one array of the same for all files. A file that
// cannot be read is said on err (and in the JSON as verdict "error").
// Exit code: 0 all sound (a library without CUDA images is sound), 1 any
// broken, 2 usage errors (bad mode or format, no files, a file that cannot
// be read).
int run_cuda_check(const std::vector<std::string>& files, std::string_view mode, std::ostream& out,
                   std::ostream& err, const CudaCheckReport& report = {});

// `-o remount` is among the -o lists: the mount form is mount(8)'s remount
// (through mount.fuse3), not a new mount.
bool is_remount(const std::vector<std::string>& lists);

// `sealfs BACKING MOUNTPOINT -o remount,ro|rw,…` (remount.cpp): flips the
// running mount's superblock between read-only and read-write and tells its
// daemon; the other options are checked and left as they are. 0 done, 1
// refused or failed (one line on err saying what to do instead).
int run_remount(const std::string& mountpoint, const std::vector<std::string>& lists, std::ostream& err);

// The store opened on B without a mount, for fsck and adopt (offline.cpp);
// problems are written to err.
Result<std::unique_ptr<Store>> open_offline_store(const BackingOptions& options, std::ostream& err);

}  // namespace sealfs::cli
