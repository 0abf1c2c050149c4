// R4: a normal close outlives the daemon. The seal of a file closed through
// M runs after its last close has returned (RELEASE comes after close(), a
// large file's seal waits a moment), so a daemon killed or unmounted in
// between would leave a normally closed file unsealed: foreign, hidden.
// Before the last close returns, the daemon appends a record of it to its own
// journal in B/.sealfs/journal/ (the file's path below B and its stamp); the
// record is marked done once the seal or abandon has run, and the journal is
// cut back to its header when nothing is pending (past a few KiB). A new
// daemon finishes
// every pending seal of a journal whose daemon is gone (journal_replay.hpp).
//
// Durable enough to survive the daemon, not a power cut: a write() lands in
// the kernel's page cache, which a SIGKILL, an OOM kill or an exit cannot
// take back, so no fsync. A power cut may lose the record, and with it the
// file's unsynced data too; R1's fsync rule covers what must survive that,
// and a journal of an earlier boot is never replayed (its files' bytes may
// not be what the record's stamp described).
//
// The file: one header line, then records, each one line ending in '\n'
// (a torn last line is ignored):
//   sealfs-journal 1 <pid> <boot id> <mount device or ->
//   C <seq> <dev> <ino> <size> <mtime s> <mtime ns> <ctime s> <ctime ns> <path, %-escaped>
//   D <seq>
// A later C of the same (dev, ino) supersedes earlier ones; D ends its seq.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/base/result.hpp"
#include "core/base/stamp.hpp"
#include "core/base/unique_fd.hpp"

namespace sealfs {

// B/.sealfs/journal, below the backing root.
inline constexpr std::string_view kJournalDir = ".sealfs/journal";
// A journal's name ends so; one being made (not yet locked and headed) ends
// in ".new", which no replay reads.
inline constexpr std::string_view kJournalSuffix = ".journal";

// One normal last close: the file's path below B then, and its stamp.
struct JournalRecord {
  std::string rel;
  Stamp stamp;
};

// Who wrote a journal: the daemon's pid, this boot's id
// (/proc/sys/kernel/random/boot_id) and its mount's device ("major:minor",
// "-" when unknown).
struct JournalHeader {
  pid_t pid = 0;
  std::string boot_id;
  std::string device;
};

// What a journal's text says.
struct JournalText {
  bool headed = false;  // the first line is a valid header
  JournalHeader header;
  std::vector<JournalRecord> pending;  // closes whose seal was not done, oldest first
  std::size_t malformed = 0;           // lines that do not parse (a torn last line included)
  std::size_t refused = 0;             // records naming a path outside B or reserved (.sealfs…)
};

std::string format_header(const JournalHeader& header);
std::string format_close(std::uint64_t seq, const JournalRecord& record);
std::string format_done(std::uint64_t seq);
// Never throws, whatever the text: hostile or torn lines are counted and skipped.
JournalText parse_journal(std::string_view text);
// A path a record may name: relative, below B (no "", ".", ".." component,
// no NUL), and no reserved component (.sealfs…: B/.sealfs itself, manifests).
bool journal_rel_acceptable(std::string_view rel);

// This boot's id; empty when unreadable (then no journal is replayed).
std::string this_boot_id();
// B/.sealfs/journal below root_fd, made when missing.
Result<UniqueFd> open_journal_dir(int root_fd);

// This daemon's own journal, locked (flock, exclusive) for its life: a new
// daemon tells a journal whose daemon is gone by taking that lock.
class SealJournal {
 public:
  // Cut back to its pending records when it grows past this and at least
  // half of it is done records.
  static constexpr off_t kCompactAt = off_t{64} * 1024;
  // Cut back to its header when nothing is pending and it is larger than this.
  static constexpr off_t kCutBackAt = 4096;

  // Makes "<pid>-<time>.journal" in dir_fd: written as ".new", locked, then
  // renamed, so that no replay reads it before it is locked.
  static Result<std::unique_ptr<SealJournal>> create(int dir_fd, const JournalHeader& header);
  ~SealJournal();
  SealJournal(const SealJournal&) = delete;
  SealJournal& operator=(const SealJournal&) = delete;

  // A normal last close of record's file: appended, superseding the file's
  // earlier pending record. One write.
  Status closed(const JournalRecord& record);
  // Mode, owner or times (times_set) of record's file were set through the
  // mount since its close (R10: not sealed): its pending record takes the
  // new stamp. Nothing when none is pending, or when the file's content may
  // have changed since: its size differs, or its mtime does and times_set
  // does not explain it (a writer opened it again and wrote). One write.
  Status attributes_set(const JournalRecord& record, bool times_set);
  // The seal (or abandon) of (dev, ino) has run: its record is done. Costs
  // nothing when none is pending; one write, or a truncate to the header.
  void done(dev_t dev, ino_t ino);
  bool pending(dev_t dev, ino_t ino) const;
  std::size_t pending_count() const;
  // The journal file's size now (tests).
  off_t size() const;
  const std::string& name() const { return name_; }

 private:
  using Key = std::pair<dev_t, ino_t>;
  struct Pending {
    std::uint64_t seq = 0;
    std::string line;
    Stamp stamp;
  };
  SealJournal(UniqueFd dir_fd, UniqueFd fd, std::string name, std::string header);
  Status append(const std::string& line);  // under mu_
  void compact();                          // under mu_

  UniqueFd dir_fd_;
  UniqueFd fd_;
  std::string name_;
  std::string header_;
  mutable std::mutex mu_;
  std::map<Key, Pending> pending_;
  std::uint64_t next_seq_ = 1;
  off_t end_ = 0;  // where the next record goes: a failed write is cut back to it
};

}  // namespace sealfs
