// R4: a new daemon finishes the seals another daemon journalled
// (seal_journal.hpp) and did not live to run, before it serves anything, so
// that each such file shows at its first lookup.
//
// Each journal in B/.sealfs/journal/ other than this daemon's is one of:
//  - unlocked: its daemon is gone (killed, or exited with seals pending).
//    Replayed and removed.
//  - locked by a daemon whose mount has ended (an unmount followed at once by
//    a mount: the old daemon still seals what was closed): waited for, up to
//    a bound, then replayed. Past the bound it is left to its daemon, and its
//    pending files stay hidden until a later mount.
//  - locked by a daemon still serving a mount of B (another mount point,
//    another host): its own business, left alone.
//  - of another boot: never replayed (a power cut may have lost the bytes
//    its stamps describe: R1) and never removed (over a shared B it may be
//    another host's live journal, whose lock this host need not see).
// A record is replayed only when its name still leads to the same file
// (dev, ino) with the stamp of its close. A file changed since, or renamed
// (no guess is made at its new name), stays hidden, as R3 says of foreign
// content, and is counted.
#pragma once

#include <chrono>
#include <cstddef>
#include <functional>
#include <string>
#include <vector>

#include "core/store/store.hpp"
#include "core/writers/seal_journal.hpp"

namespace sealfs {

struct ReplayOptions {
  std::string boot_id;  // this boot's (this_boot_id); empty: nothing is replayed
  // How long to wait for a journal whose daemon's mount has ended.
  std::chrono::milliseconds wait{60000};
  // Whether the daemon that wrote header (and holds its lock) still serves
  // its mount. The adapter knows mounts; core does not.
  std::function<bool(const JournalHeader& header)> owner_serving;
  // Where to say what was done and why (a log line each); may be empty.
  std::function<void(const std::string& line)> log;
};

struct ReplayReport {
  std::size_t journals = 0;    // journals read (and removed)
  std::size_t sealed = 0;      // pending seals finished
  std::size_t changed = 0;     // file changed since its close: left hidden
  std::size_t missing = 0;     // no such name, or it leads to another file (renamed): left hidden
  std::size_t failed = 0;      // the seal failed (the error logged)
  std::size_t live = 0;        // journals of a daemon still serving: left alone
  std::size_t other_boot = 0;  // journals of another boot or host: left alone
  std::size_t timed_out = 0;   // journals whose ending daemon outlasted the wait: left alone
  std::size_t ignored = 0;     // malformed lines and refused records, of every journal
};

// Replays every journal in dir_fd (open_journal_dir) with store.
ReplayReport replay_journals(Store& store, int dir_fd, const ReplayOptions& options);

// What one journal holds, as `sealfs fsck` reports it.
struct JournalSurvey {
  std::string name;
  bool headed = false;  // the first line is a valid header (else nothing in it is replayed)
  JournalHeader header;
  bool this_boot = false;  // of boot_id: replayable once its daemon is gone
  // Locked: its daemon still runs (serves its mount, or seals after its
  // unmount) and finishes its own seals.
  bool live = false;
  std::size_t pending = 0;  // closes whose seal was not done
  std::size_t ignored = 0;  // malformed lines and refused records
};

// Every journal in B/.sealfs/journal below root_fd, read without writing
// anything (none when the directory is missing). A journal is told live by
// trying its lock, shared and at once, and letting it go.
Result<std::vector<JournalSurvey>> survey_journals(int root_fd, const std::string& boot_id);

}  // namespace sealfs
