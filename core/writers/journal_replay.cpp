#include "core/writers/journal_replay.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "core/base/result.hpp"
#include "core/base/stamp.hpp"
#include "core/base/unique_fd.hpp"
#include "core/layout/names.hpp"
#include "core/layout/paths.hpp"
#include "core/store/store.hpp"
#include "core/writers/seal_journal.hpp"

namespace sealfs {
namespace {

constexpr std::chrono::milliseconds kLockPoll{20};
// No daemon writes a journal this large (it is cut back whenever nothing is
// pending, and compacted past SealJournal::kCompactAt): not read.
constexpr off_t kMaxJournalBytes = off_t{64} << 20;

void say(const ReplayOptions& options, const std::string& line) {
  if (options.log) options.log(line);
}

bool ends_with(std::string_view s, std::string_view suffix) {
  return s.size() > suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

std::string read_journal(int fd) {
  std::string text;
  char buf[16 * 1024];
  off_t off = 0;
  for (;;) {
    const ssize_t n = ::pread(fd, buf, sizeof buf, off);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    text.append(buf, static_cast<std::size_t>(n));
    off += n;
  }
  return text;
}

// Finishes one journalled seal: the name must still lead to the same file
// with the stamp of its close.
void replay_record(Store& store, int root_fd, const JournalRecord& record, ReplayReport& report,
                   const ReplayOptions& options) {
  const auto [parent_rel, name] = split_parent(record.rel);
  auto parent = open_beneath(root_fd, parent_rel, O_PATH | O_DIRECTORY);
  auto st = parent ? stat_at(parent->get(), name) : Result<struct stat>(parent.error());
  if (!st || !S_ISREG(st->st_mode) || st->st_dev != record.stamp.dev || st->st_ino != record.stamp.ino) {
    ++report.missing;
    say(options, "seal journal: " + record.rel +
                     ": no longer that file (gone, renamed or replaced since its close): left as it is");
    return;
  }
  if (!(Stamp::of(*st) == record.stamp)) {
    ++report.changed;
    say(options, "seal journal: " + record.rel + ": changed since its close: left unsealed (hidden)");
    return;
  }
  auto fd = open_beneath(parent->get(), name, O_PATH | O_NOFOLLOW);
  auto again = fd ? stat_fd(fd->get()) : Result<struct stat>(fd.error());
  if (!again || !(Stamp::of(*again) == record.stamp)) {
    ++report.changed;
    say(options, "seal journal: " + record.rel + ": changed while replayed: left unsealed (hidden)");
    return;
  }
  if (Status sealed = store.seal(fd->get(), PlaceHint{parent->get(), name}); !sealed) {
    ++report.failed;
    say(options, "seal journal: " + record.rel + ": seal failed: " + sealed.error().message);
    return;
  }
  ++report.sealed;
}

// Takes journal's lock, waiting while its daemon has stopped serving (it is
// still sealing). False when the journal is left alone.
bool take_lock(int fd, const JournalText& text, const std::string& name, ReplayReport& report,
               const ReplayOptions& options) {
  if (::flock(fd, LOCK_EX | LOCK_NB) == 0) return true;
  if (errno != EWOULDBLOCK) {
    say(options, "seal journal " + name + ": cannot lock: " + std::strerror(errno) + "; left alone");
    return false;
  }
  if (!text.headed || !options.owner_serving || options.owner_serving(text.header)) {
    ++report.live;
    return false;
  }
  say(options, "seal journal " + name + ": daemon " + std::to_string(text.header.pid) +
                   " has unmounted and is still sealing; waiting for it");
  const auto until = std::chrono::steady_clock::now() + options.wait;
  while (std::chrono::steady_clock::now() < until) {
    std::this_thread::sleep_for(kLockPoll);
    if (::flock(fd, LOCK_EX | LOCK_NB) == 0) return true;
  }
  ++report.timed_out;
  say(options, "seal journal " + name + ": daemon " + std::to_string(text.header.pid) +
                   " still sealing after " + std::to_string(options.wait.count()) +
                   " ms: its files stay hidden until a later mount");
  return false;
}

void replay_journal(Store& store, int dir_fd, int root_fd, const std::string& name, ReplayReport& report,
                    const ReplayOptions& options) {
  UniqueFd fd(::openat(dir_fd, name.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC));
  if (!fd) return;
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0 || !S_ISREG(st.st_mode) || st.st_size > kMaxJournalBytes) {
    say(options, "seal journal " + name + ": not a regular file of a sane size: ignored");
    return;
  }
  const JournalText before = parse_journal(read_journal(fd.get()));
  // Another boot's: this host's earlier life (R1: a power cut may have lost
  // the bytes its stamps describe), or another host's over a shared B, whose
  // lock this host may not see. Neither replayed nor removed.
  if (before.headed && before.header.boot_id != options.boot_id) {
    ++report.other_boot;
    if (!before.pending.empty())
      say(options, "seal journal " + name + ": of another boot (or host): its " +
                       std::to_string(before.pending.size()) + " pending seals are not replayed");
    return;
  }
  if (!take_lock(fd.get(), before, name, report, options)) return;
  // Another new daemon may have replayed and removed it meanwhile.
  auto now = stat_at(dir_fd, name);
  if (!now || now->st_ino != st.st_ino || now->st_dev != st.st_dev) return;
  const JournalText text = parse_journal(read_journal(fd.get()));
  ++report.journals;
  report.ignored += text.malformed + text.refused;
  if (text.malformed + text.refused > 0)
    say(options, "seal journal " + name + ": " + std::to_string(text.malformed) + " malformed lines and " +
                     std::to_string(text.refused) + " records naming no file below B ignored");
  if (!text.headed) {
    say(options, "seal journal " + name + ": no valid header: nothing in it replayed");
  } else if (text.header.boot_id != options.boot_id) {
    return;  // rewritten as another boot's meanwhile: not ours to remove
  } else {
    for (const auto& record : text.pending) replay_record(store, root_fd, record, report, options);
  }
  // Removed while still locked: no other daemon reads it half done.
  ::unlinkat(dir_fd, name.c_str(), 0);
}

}  // namespace

ReplayReport replay_journals(Store& store, int dir_fd, const ReplayOptions& options) {
  ReplayReport report;
  if (options.boot_id.empty()) {
    say(options, "seal journal: this boot's id is unreadable: no journal replayed");
    return report;
  }
  auto root = store.root();
  auto children = read_dir(dir_fd);
  if (!root || !children) {
    say(options, "seal journal: cannot read B/.sealfs/journal: no journal replayed");
    return report;
  }
  for (const auto& child : *children)
    if (ends_with(child.name, kJournalSuffix))
      replay_journal(store, dir_fd, root->fd.get(), child.name, report, options);
  return report;
}

Result<std::vector<JournalSurvey>> survey_journals(int root_fd, const std::string& boot_id) {
  std::vector<JournalSurvey> out;
  // As open_journal_dir, without making it.
  UniqueFd state(
      ::openat(root_fd, std::string(kStateDir).c_str(), O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  const std::string name(kJournalDir.substr(kStateDir.size() + 1));
  UniqueFd dir(state ? ::openat(state.get(), name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
                     : -1);
  if (!dir) {
    if (errno == ENOENT) return out;  // no daemon ever journalled here
    return errno_error("open B/.sealfs/journal");
  }
  auto children = read_dir(dir.get());
  if (!children) return children.error();
  for (const auto& child : *children) {
    if (!ends_with(child.name, kJournalSuffix)) continue;
    UniqueFd fd(::openat(dir.get(), child.name.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC));
    struct stat st {};
    if (!fd || ::fstat(fd.get(), &st) != 0 || !S_ISREG(st.st_mode) || st.st_size > kMaxJournalBytes)
      continue;  // gone meanwhile (replayed), or not one a replay reads either
    const JournalText text = parse_journal(read_journal(fd.get()));
    JournalSurvey j;
    j.name = child.name;
    j.headed = text.headed;
    j.header = text.header;
    j.this_boot = text.headed && !boot_id.empty() && text.header.boot_id == boot_id;
    j.pending = text.pending.size();
    j.ignored = text.malformed + text.refused;
    if (::flock(fd.get(), LOCK_SH | LOCK_NB) == 0)
      ::flock(fd.get(), LOCK_UN);
    else
      j.live = errno == EWOULDBLOCK;
    out.push_back(std::move(j));
  }
  return out;
}

}  // namespace sealfs
