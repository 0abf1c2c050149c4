#include "fs/fuse/close_journal.hpp"

#include <syslog.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <memory>
#include <shared_mutex>
#include <string>
#include <utility>

#include "core/base/result.hpp"
#include "core/base/stamp.hpp"
#include "core/writers/journal_replay.hpp"
#include "core/writers/seal_journal.hpp"
#include "core/writers/writer_tracking.hpp"
#include "fs/fuse/file_handle.hpp"
#include "fs/fuse/filesystem.hpp"
#include "fs/fuse/handle_life.hpp"
#include "fs/fuse/inode_table.hpp"
#include "fs/fuse/writer_tasks.hpp"

namespace sealfs::fuse {
namespace {

// How long a new daemon waits for an old one that has unmounted and still
// seals (an unmount followed at once by a mount): a seal of a file of
// several GB included.
constexpr std::chrono::seconds kOldDaemonWait{60};

std::atomic<bool> g_write_failure_logged{false};

enum class What { close, attributes, times };

// A close, or new attributes (with times or without) of a closed file,
// seen through fd (the file's own descriptor on B).
void record_by(Filesystem& fs, int fd, const Inode& inode, What what) {
  auto st = fs.store->attributes(fd);
  // A file with no name below B (unlinked, in B/.sealfs) has nothing a
  // later daemon could find: not journalled.
  auto rel = st ? fs.store->path_below_root(fd, inode.last_seen().hint()) : Result<std::string>(st.error());
  Status written = rel ? Status{} : Status(rel.error());
  if (rel) {
    const JournalRecord r{std::move(*rel), Stamp::of(*st)};
    written =
        what == What::close ? fs.journal->closed(r) : fs.journal->attributes_set(r, what == What::times);
  }
  if (!written && written.code() != ENOENT && written.code() != ESTALE &&
      !g_write_failure_logged.exchange(true))
    syslog(LOG_WARNING,
           "sealfs: a close could not be journalled (%s): if the daemon dies before its seal, the file "
           "stays hidden. Logged once.",
           written.error().message.c_str());
}

void record(Filesystem& fs, const Inode& inode, What what = What::close) {
  const auto pfd = inode.path_fd();
  if (pfd && pfd->valid()) record_by(fs, pfd->get(), inode, what);
}

}  // namespace

void replay_seal_journals(Filesystem& fs) {
  if (fs.read_only) return;
  auto root = fs.store->root();
  auto dir = root ? open_journal_dir(root->fd.get()) : Result<UniqueFd>(root.error());
  if (!dir) {
    syslog(LOG_WARNING, "sealfs: seal journal: %s: nothing replayed", dir.error().message.c_str());
    return;
  }
  ReplayOptions options;
  options.boot_id = this_boot_id();
  options.wait = kOldDaemonWait;
  // The daemon holding a journal still serves while its mount's device is a
  // FUSE mount here; unmounted, it is only sealing what was closed.
  options.owner_serving = [](const JournalHeader& header) {
    return header.device == "-" || !fuse_mount_ids_seen_by(::getpid(), header.device).empty();
  };
  options.log = [](const std::string& line) { syslog(LOG_INFO, "sealfs: %s", line.c_str()); };
  const ReplayReport r = replay_journals(*fs.store, dir->get(), options);
  if (r.journals + r.live + r.timed_out + r.other_boot > 0)
    syslog(LOG_INFO,
           "sealfs: seal journals: %zu replayed (%zu seals finished, %zu files changed since their close and "
           "%zu gone or renamed left hidden, %zu failed, %zu lines ignored), %zu of live mounts and %zu of "
           "another boot or host left alone, %zu whose daemon still seals left to it",
           r.journals, r.sealed, r.changed, r.missing, r.failed, r.ignored, r.live, r.other_boot,
           r.timed_out);
}

void start_seal_journal(Filesystem& fs) {
  if (fs.read_only) return;
  auto root = fs.store->root();
  auto dir = root ? open_journal_dir(root->fd.get()) : Result<UniqueFd>(root.error());
  const std::string device = fuse_mount_device_of(fs.mountpoint);
  auto journal = dir ? SealJournal::create(dir->get(), JournalHeader{::getpid(), this_boot_id(), device})
                     : Result<std::unique_ptr<SealJournal>>(dir.error());
  if (!journal) {
    syslog(LOG_WARNING,
           "sealfs: no seal journal (%s): a file closed just before the daemon dies stays hidden",
           journal.error().message.c_str());
    return;
  }
  fs.journal = std::move(*journal);
}

void stop_seal_journal(Filesystem& fs) { fs.journal.reset(); }

void journal_close(Filesystem& fs, FileHandle& handle) {
  if (!fs.journal || !handle.tracked || !handle.inode) return;
  const HandleEnd end = handle.life.end();
  if (end.abandoned) return;
  const Inode& inode = *handle.inode;
  if (!fs.writers.last_writer_seals(inode.dev, inode.ino, end.changed || end.made)) return;
  // The handle's own descriptor, never the inode's O_PATH one: that would
  // attach every detached inode again, and a process that holds thousands
  // of files open flushes them all at once when it forks and execs (each
  // O_CLOEXEC close is a FLUSH), which ran the daemon out of descriptors. A
  // parked handle (descriptors ran out) is not journalled: descriptors are
  // what is short then, and a daemon killed before its seal leaves that file
  // hidden, as without a journal.
  std::shared_lock lock(handle.park_mu);
  if (handle.parked || !handle.fd.valid()) return;
  record_by(fs, handle.fd.get(), inode, What::close);
}

void journal_deferred(Filesystem& fs, const Inode& inode) {
  if (fs.journal && !fs.journal->pending(inode.dev, inode.ino)) record(fs, inode);
}

void journal_attributes_set(Filesystem& fs, const Inode& inode, bool times_set) {
  if (fs.journal && fs.journal->pending(inode.dev, inode.ino))
    record(fs, inode, times_set ? What::times : What::attributes);
}

void journal_done(Filesystem& fs, dev_t dev, ino_t ino) {
  if (fs.journal) fs.journal->done(dev, ino);
}

}  // namespace sealfs::fuse
