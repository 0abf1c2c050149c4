#include "core/store/quarantine.hpp"

#include <fcntl.h>
#include <rapidjson/document.h>
#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdio>  // renameat2
#include <cstring>
#include <ctime>
#include <iterator>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/base/metrics.hpp"
#include "core/base/result.hpp"
#include "core/base/unique_fd.hpp"
#include "core/layout/names.hpp"
#include "core/layout/paths.hpp"
#include "core/manifest/manifest.hpp"
#include "core/store/quarantine_report.hpp"  // allocated_bytes: the cap and fsck count alike
#include "core/store/space.hpp"

namespace sealfs {
namespace {

constexpr std::string_view kReasonFile = "reason.json";
// A slot whose directory changed this recently may still be filling (by
// another process, within one timestamp tick): measured again each time.
constexpr time_t kSettledSeconds = 1;

std::string utc_stamp(const struct timespec& now, bool compact) {
  struct tm tm {};
  ::gmtime_r(&now.tv_sec, &tm);
  char buf[64];
  if (compact) {
    // Sorts chronologically by name: the slot name is its age.
    std::snprintf(buf, sizeof buf, "%04d%02d%02dT%02d%02d%02d.%09ldZ", tm.tm_year + 1900, tm.tm_mon + 1,
                  tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, now.tv_nsec);
  } else {
    std::snprintf(buf, sizeof buf, "%04d-%02d-%02dT%02d:%02d:%02dZ", tm.tm_year + 1900, tm.tm_mon + 1,
                  tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec);
  }
  return buf;
}

// What a slot's reason.json says.
struct ReasonRecord {
  std::string rel;
  std::string reason;
  std::string time;
  std::vector<std::pair<std::string, std::string>> left_behind;  // companion, why it stayed
  struct Dropped {
    std::string why;
    std::uint64_t bytes = 0;
    std::uint64_t max_bytes = 0;
    std::string outcome;  // "deleted", or why the deletion failed
  };
  std::optional<Dropped> dropped;
};

// reason.json is UTF-8 for every reader; a path whose bytes are not (file
// names are bytes) is written with each byte above 0x7f as the text \xHH.
void put(rapidjson::Writer<rapidjson::StringBuffer>& w, std::string_view s) {
  if (is_valid_utf8(s)) {
    w.String(s.data(), static_cast<rapidjson::SizeType>(s.size()));
    return;
  }
  std::string shown;
  for (unsigned char c : s) {
    if (c < 0x80) {
      shown.push_back(static_cast<char>(c));
    } else {
      char hex[5];
      std::snprintf(hex, sizeof hex, "\\x%02x", c);
      shown += hex;
    }
  }
  w.String(shown.data(), static_cast<rapidjson::SizeType>(shown.size()));
}

std::string reason_json(const ReasonRecord& r) {
  rapidjson::StringBuffer sb;
  rapidjson::Writer<rapidjson::StringBuffer> w(sb);
  w.StartObject();
  w.Key("path");
  put(w, r.rel);
  w.Key("reason");
  put(w, r.reason);
  w.Key("time");
  put(w, r.time);
  if (!r.left_behind.empty()) {
    w.Key("left_behind");
    w.StartArray();
    for (const auto& [name, why] : r.left_behind) {
      w.StartObject();
      w.Key("name");
      put(w, name);
      w.Key("error");
      put(w, why);
      w.EndObject();
    }
    w.EndArray();
  }
  if (r.dropped) {
    w.Key("dropped");
    w.StartObject();
    w.Key("why");
    put(w, r.dropped->why);
    w.Key("bytes");
    w.Uint64(r.dropped->bytes);
    w.Key("max_bytes");
    w.Uint64(r.dropped->max_bytes);
    w.Key("outcome");
    put(w, r.dropped->outcome);
    w.EndObject();
  }
  w.EndObject();
  return std::string(sb.GetString(), sb.GetSize()) + "\n";
}

// The "path" a slot's reason.json names, for the log; "?" when unreadable.
std::string recorded_path(int qdir_fd, const std::string& slot) {
  auto fd = open_beneath(qdir_fd, slot + "/" + std::string(kReasonFile), O_RDONLY | O_NOFOLLOW);
  if (!fd) return "?";
  std::string text(std::size_t{64} * 1024, '\0');
  ssize_t n = ::pread(fd->get(), text.data(), text.size(), 0);
  if (n <= 0) return "?";
  text.resize(static_cast<std::size_t>(n));
  rapidjson::Document doc;
  doc.Parse(text.data(), text.size());
  if (doc.HasParseError() || !doc.IsObject() || !doc.HasMember("path") || !doc["path"].IsString()) return "?";
  return {doc["path"].GetString(), doc["path"].GetStringLength()};
}

Status write_all_at(int fd, std::string_view data) {
  std::size_t done = 0;
  while (done < data.size()) {
    ssize_t n = ::pwrite(fd, data.data() + done, data.size() - done, static_cast<off_t>(done));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return errno_error("write " + std::string(kReasonFile));
    done += static_cast<std::size_t>(n);
  }
  if (::ftruncate(fd, static_cast<off_t>(data.size())) != 0)
    return errno_error("truncate " + std::string(kReasonFile));
  return {};
}

// Bytes B has available to unprivileged writers now; nullopt when unknown.
std::optional<std::uint64_t> available_bytes(int root_fd) {
  struct statvfs v {};
  if (::fstatvfs(root_fd, &v) != 0) return std::nullopt;
  return static_cast<std::uint64_t>(v.f_bavail) * v.f_frsize;
}

// Whether the slot holds nothing but its reason.json (or nothing at all).
bool only_reason(int qdir_fd, const std::string& slot) {
  auto fd = open_beneath(qdir_fd, slot, O_PATH | O_DIRECTORY);
  if (!fd) return true;
  auto children = read_dir(fd->get());
  if (!children) return false;
  return std::ranges::all_of(*children, [](const DirChild& c) { return c.name == kReasonFile; });
}

// The name an object takes inside its slot: never reason.json's.
std::string name_in_slot(const std::string& name) { return name == kReasonFile ? "object." + name : name; }

bool same_time(const struct timespec& a, const struct timespec& b) {
  return a.tv_sec == b.tv_sec && a.tv_nsec == b.tv_nsec;
}

// A slot being made: until commit(), its destructor takes it away again
// (reason.json, then the directory) with no new descriptor, so a failure at
// any step (EMFILE included) leaves nothing behind. Owns the slot's fd.
class SlotUnderConstruction {
 public:
  // After mkdirat(qdir_fd, slot) succeeded.
  SlotUnderConstruction(int qdir_fd, std::string slot) : qdir_fd_(qdir_fd), slot_(std::move(slot)) {}
  SlotUnderConstruction(const SlotUnderConstruction&) = delete;
  SlotUnderConstruction& operator=(const SlotUnderConstruction&) = delete;
  ~SlotUnderConstruction() {
    if (committed_) return;
    if (reason_made_ && slot_fd_ && ::unlinkat(slot_fd_.get(), std::string(kReasonFile).c_str(), 0) != 0 &&
        errno != ENOENT)
      std::fprintf(stderr, "sealfs: quarantine: cannot remove %s/%s of a failed quarantine (errno %d)\n",
                   slot_.c_str(), std::string(kReasonFile).c_str(), errno);
    if (::unlinkat(qdir_fd_, slot_.c_str(), AT_REMOVEDIR) != 0 && errno != ENOENT)
      std::fprintf(stderr,
                   "sealfs: quarantine: cannot remove the slot %s of a failed quarantine (errno %d)\n",
                   slot_.c_str(), errno);
  }
  Status open() {
    auto fd = open_beneath(qdir_fd_, slot_, O_PATH | O_DIRECTORY);
    if (!fd) return fd.error();
    slot_fd_ = std::move(*fd);
    return {};
  }
  int fd() const { return slot_fd_.get(); }
  void reason_made() { reason_made_ = true; }
  void commit() { committed_ = true; }

 private:
  int qdir_fd_;
  std::string slot_;
  UniqueFd slot_fd_;
  bool reason_made_ = false;
  bool committed_ = false;
};

// Into a slot this process has just made (mkdirat): nothing there can be
// replaced, so RENAME_NOREPLACE is only a guard. A filesystem without
// renameat2's flags (GlusterFS's FUSE client: EINVAL) gets a plain rename.
int move_into_slot(int from_fd, const std::string& name, int slot_fd, const std::string& target) {
  if (::renameat2(from_fd, name.c_str(), slot_fd, target.c_str(), RENAME_NOREPLACE) == 0) return 0;
  if (errno != EINVAL) return -1;
  return ::renameat(from_fd, name.c_str(), slot_fd, target.c_str());
}

// The companions (a file entry's sidecar) follow the object into its slot;
// one that cannot is noted in record.left_behind (one that is gone is not).
void move_companions(const Quarantine::Request& request, int slot_fd, ReasonRecord& record) {
  for (const auto& c : request.companions) {
    if (move_into_slot(request.parent_fd, c, slot_fd, name_in_slot(c)) == 0 || errno == ENOENT) continue;
    const int err = errno;
    std::fprintf(stderr, "sealfs: quarantine %s: cannot move %s along (errno %d)\n", request.rel.c_str(),
                 c.c_str(), err);
    record.left_behind.emplace_back(c, std::strerror(err));
  }
}

// reason.json rewritten through its open descriptor (no new one needed).
void amend_reason(int reason_fd, const ReasonRecord& record, const std::string& slot) {
  if (Status s = write_all_at(reason_fd, reason_json(record)); !s)
    std::fprintf(stderr, "sealfs: quarantine %s: cannot amend %s/%s: %s\n", record.rel.c_str(), slot.c_str(),
                 std::string(kReasonFile).c_str(), s.error().message.c_str());
}

// Rules 1 and 4: everything in the slot but reason.json goes; record.dropped
// says why, how big it was and whether the deletion worked.
void drop_contents(int slot_fd, std::string why, std::uint64_t bytes, std::uint64_t max_bytes,
                   ReasonRecord& record) {
  record.dropped = ReasonRecord::Dropped{std::move(why), bytes, max_bytes, "deleted"};
  auto children = read_dir(slot_fd);
  if (!children) {
    record.dropped->outcome = "not deleted: " + children.error().message;
    return;
  }
  for (const auto& c : *children) {
    if (c.name == kReasonFile) continue;
    if (Status s = remove_tree_at(slot_fd, c.name); !s) {
      record.dropped->outcome = "not deleted: " + s.error().message;
      return;
    }
  }
}

void log_dropped(const std::string& slot, const ReasonRecord& record) {
  std::fprintf(
      stderr,
      "sealfs: quarantine: dropped %s from %s/%s: it occupies %llu bytes, more than the %llu bytes it may; "
      "its reason.json stays (%s)\n",
      record.rel.c_str(), std::string(kQuarantineDir).c_str(), slot.c_str(),
      static_cast<unsigned long long>(record.dropped->bytes),
      static_cast<unsigned long long>(record.dropped->max_bytes), record.dropped->outcome.c_str());
}

// reason.json in a slot being built, written. A spare's is there already,
// its blocks allocated; on a full B the text is best effort and the object
// is moved aside all the same (R4).
Result<UniqueFd> write_reason(int slot_fd, bool spare, const ReasonRecord& record, const std::string& slot) {
  int raw = ::openat(slot_fd, std::string(kReasonFile).c_str(),
                     O_RDWR | O_CREAT | (spare ? 0 : O_EXCL) | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (raw < 0) return errno_error("create " + std::string(kReasonFile));
  UniqueFd fd(raw);
  if (Status wrote = write_all_at(fd.get(), reason_json(record)); !wrote) {
    if (!out_of_space(wrote.code())) {
      ::unlinkat(slot_fd, std::string(kReasonFile).c_str(), 0);  // the slot is taken down whole
      return wrote.error();
    }
    std::fprintf(
        stderr, "sealfs: quarantine %s: %s/%s not written (%s); the object is moved aside all the same\n",
        record.rel.c_str(), slot.c_str(), std::string(kReasonFile).c_str(), wrote.error().message.c_str());
  }
  return fd;
}

}  // namespace

Quarantine::Quarantine(int root_fd, std::uint64_t max_objects, std::uint64_t max_bytes, Metrics& metrics)
    : root_fd_(root_fd), max_objects_(max_objects), max_bytes_(max_bytes), metrics_(metrics) {}

// <UTC time>-<pid>-<seq>: sorts by age, unique per process.
std::string Quarantine::next_slot_name(const struct timespec& now) {
  char tail[64];
  std::snprintf(tail, sizeof tail, "-%ld-%06llu", static_cast<long>(::getpid()),
                static_cast<unsigned long long>(++seq_));
  return utc_stamp(now, true) + tail;
}

namespace {

// Re-check under the name: another thread or host may have replaced the
// object since it was judged; then there is nothing of ours to move.
Result<bool> still_there(const Quarantine::Request& request) {
  auto now_st = stat_at(request.parent_fd, request.name);
  if (!now_st) {
    if (now_st.code() == ENOENT || now_st.code() == ENOTDIR) return false;
    return now_st.error();
  }
  return now_st->st_dev == request.dev && now_st->st_ino == request.ino;
}

constexpr const char* kOverCap =
    "the object alone occupies more than the quarantine's byte cap; only this record is kept";
constexpr const char* kOverAvailable =
    "the object occupies more than the backing store has available; only this record is kept";

}  // namespace

Result<bool> Quarantine::move(const Request& request) {
  std::lock_guard lock(mu_);
  auto there = still_there(request);
  if (!there || !*there) return there;

  auto qdir = open_beneath(root_fd_, kQuarantineDir, O_PATH | O_DIRECTORY);
  if (!qdir) return qdir.error();
  struct timespec now {};
  ::clock_gettime(CLOCK_REALTIME, &now);
  const std::string slot = next_slot_name(now);
  bool spare = false;
  if (::mkdirat(qdir->get(), slot.c_str(), 0700) != 0) {
    Error e = errno_error("mkdir quarantine slot " + slot);
    // B is full: a slot made in advance, renamed in, needs no new block.
    if (!out_of_space(e.code) || !take_spare(qdir->get(), slot)) return e;
    spare = true;
  }
  SlotUnderConstruction building(qdir->get(), slot);
  if (Status opened = building.open(); !opened) return opened.error();

  // The reason goes in first, so a slot never holds an object without it.
  // Its descriptor stays open: amending it later needs no new one.
  ReasonRecord record{request.rel, request.reason, utc_stamp(now, false), {}, {}};
  auto reason_fd = write_reason(building.fd(), spare, record, slot);
  if (!reason_fd) return reason_fd.error();
  building.reason_made();

  const std::string target_name = name_in_slot(request.name);
  if (move_into_slot(request.parent_fd, request.name, building.fd(), target_name) != 0) {
    Error e = errno_error("rename into quarantine " + request.rel);
    if (e.code == ENOENT) return false;  // gone meanwhile: nothing to quarantine
    return e;
  }
  building.commit();  // the object is in: the slot stays, with its reason

  move_companions(request, building.fd(), record);
  if (!record.left_behind.empty()) amend_reason(reason_fd->get(), record, slot);
  metrics_.count_quarantined(request.cause);
  std::fprintf(stderr, "sealfs: quarantined %s: %s (in %s/%s)\n", request.rel.c_str(), request.reason.c_str(),
               std::string(kQuarantineDir).c_str(), slot.c_str());

  // Rules 1 and 4: a slot over the byte cap alone, or bigger than what B
  // has available, keeps its reason only. (Measured once, complete:
  // enforce_bounds finds the size cached.)
  auto bytes = slot_bytes(qdir->get(), slot, /*settled=*/true);
  const auto avail = available_bytes(root_fd_);
  const bool over_cap = bytes && *bytes > max_bytes_;
  if (over_cap || (bytes && avail && *bytes > *avail))
    drop_contents(building.fd(), over_cap ? kOverCap : kOverAvailable, *bytes, over_cap ? max_bytes_ : *avail,
                  record);
  if (record.dropped) {
    sizes_.erase(slot);
    amend_reason(reason_fd->get(), record, slot);
    log_dropped(slot, record);
  }
  reason_fd->reset();
  Status bounded = enforce_bounds(qdir->get(), slot);
  if (!bounded) std::fprintf(stderr, "sealfs: quarantine bounds: %s\n", bounded.error().message.c_str());
  replenish_spares_locked();
  return true;
}

Result<std::vector<std::string>> Quarantine::slots() const {
  auto qdir = open_beneath(root_fd_, kQuarantineDir, O_PATH | O_DIRECTORY);
  if (!qdir) return qdir.error();
  auto children = read_dir(qdir->get());
  if (!children) return children.error();
  std::vector<std::string> names;
  for (auto& c : *children) names.push_back(std::move(c.name));
  std::sort(names.begin(), names.end());
  return names;
}

// Bytes of one slot, from the cache while its directory is unchanged.
// settled: the caller knows the slot is complete (the one it just made).
Result<std::uint64_t> Quarantine::slot_bytes(int qdir_fd, const std::string& slot, bool settled) {
  auto st = stat_at(qdir_fd, slot);
  if (!st) return st.error();
  auto it = sizes_.find(slot);
  if (it != sizes_.end() && it->second.ino == st->st_ino && same_time(it->second.mtime, st->st_mtim) &&
      same_time(it->second.ctime, st->st_ctim))
    return it->second.bytes;
  auto bytes = allocated_bytes(qdir_fd, slot, 0);
  if (!bytes) return bytes.error();
  struct timespec now {};
  ::clock_gettime(CLOCK_REALTIME, &now);
  if (settled || st->st_ctim.tv_sec + kSettledSeconds < now.tv_sec)
    sizes_[slot] = CachedSize{st->st_ino, st->st_mtim, st->st_ctim, *bytes};
  else
    sizes_.erase(slot);
  return *bytes;
}

// Sizes of every slot in slots (sorted by name, oldest first), into
// s.bytes; slots gone meanwhile are marked gone. False when one could not be
// measured (then the byte cap is not applied this time).
bool Quarantine::measure(int qdir_fd, std::vector<SlotSize>& slots, const std::string& keep,
                         std::uint64_t& total, std::uint64_t& keep_bytes) {
  bool measured = true;
  for (auto& s : slots) {
    auto b = slot_bytes(qdir_fd, s.name, s.name == keep);
    if (!b) {
      if (b.code() == ENOENT) {
        s.gone = true;
        continue;
      }
      std::fprintf(
          stderr,
          "sealfs: quarantine bounds: cannot measure %s (%s, errno %d): the byte cap is not applied now\n",
          s.name.c_str(), b.error().message.c_str(), b.code());
      measured = false;
      continue;
    }
    s.bytes = *b;
    total += *b;
    if (s.name == keep) keep_bytes = *b;
  }
  return measured;
}

// Removes one slot (logged with why); false when it could not be removed.
bool Quarantine::evict(int qdir_fd, SlotSize& s, const std::string& why) {
  const std::string path = recorded_path(qdir_fd, s.name);
  if (Status r = remove_tree_at(qdir_fd, s.name); !r) {
    std::fprintf(stderr, "sealfs: quarantine: cannot remove %s/%s (%s): %s\n",
                 std::string(kQuarantineDir).c_str(), s.name.c_str(), path.c_str(),
                 r.error().message.c_str());
    return false;
  }
  std::fprintf(stderr, "sealfs: quarantine: removed %s/%s (%s, %llu bytes): %s\n",
               std::string(kQuarantineDir).c_str(), s.name.c_str(), path.c_str(),
               static_cast<unsigned long long>(s.bytes), why.c_str());
  s.gone = true;
  sizes_.erase(s.name);
  return true;
}

// The policy is in the header comment.
Status Quarantine::enforce_bounds(int qdir_fd, const std::string& keep) {
  auto children = read_dir(qdir_fd);
  if (!children) return children.error();
  std::vector<SlotSize> slots;
  for (auto& c : *children) slots.push_back(SlotSize{std::move(c.name), 0, false});
  std::sort(slots.begin(), slots.end(), [](const SlotSize& a, const SlotSize& b) { return a.name < b.name; });
  // Forget the sizes of slots no longer there.
  for (auto it = sizes_.begin(); it != sizes_.end();) {
    const bool listed = std::ranges::binary_search(slots, it->first, {}, &SlotSize::name);
    it = listed ? std::next(it) : sizes_.erase(it);
  }
  std::uint64_t total = 0;
  std::uint64_t keep_bytes = 0;
  const bool measured = measure(qdir_fd, slots, keep, total, keep_bytes);
  auto count = static_cast<std::uint64_t>(
      std::count_if(slots.begin(), slots.end(), [](const SlotSize& s) { return !s.gone; }));
  auto evicted = [&](const SlotSize& s) {
    --count;
    total -= s.bytes;
  };
  // Rule 2: older slots over the byte cap alone.
  if (measured) {
    for (auto& s : slots) {
      if (s.gone || s.name == keep || s.bytes <= max_bytes_) continue;
      if (evict(qdir_fd, s, "it alone exceeds the byte cap of " + std::to_string(max_bytes_))) evicted(s);
    }
  }
  // Rule 3: oldest first, only to make room for a slot that fits.
  const bool byte_bound = measured && keep_bytes <= max_bytes_;
  for (auto& s : slots) {
    const bool over_count = count > max_objects_;
    const bool over_bytes = byte_bound && total > max_bytes_;
    if (!over_count && !over_bytes) break;
    if (s.gone || s.name == keep) continue;
    if (evict(qdir_fd, s,
              over_count ? "the oldest, beyond " + std::to_string(max_objects_) + " slots"
                         : "the oldest, to make room for " + keep + " (" + std::to_string(total) +
                               " bytes held, cap " + std::to_string(max_bytes_) + ")"))
      evicted(s);
  }
  // Rule 4: never more than B has available, oldest first.
  auto avail = available_bytes(root_fd_);
  if (measured && avail) {
    for (auto& s : slots) {
      if (total <= *avail) break;
      if (s.gone || s.name == keep) continue;
      const std::uint64_t freed = s.bytes;
      if (evict(qdir_fd, s,
                "the oldest, while the quarantine holds more (" + std::to_string(total) +
                    " bytes) than the backing store has available (" + std::to_string(*avail) + " bytes)")) {
        evicted(s);
        *avail += freed;
      }
    }
  }
  return {};
}

bool Quarantine::make_room() {
  std::lock_guard lock(mu_);
  auto qdir = open_beneath(root_fd_, kQuarantineDir, O_PATH | O_DIRECTORY);
  if (!qdir) return false;
  auto children = read_dir(qdir->get());
  if (!children) return false;
  std::vector<std::string> names;
  for (auto& c : *children) names.push_back(std::move(c.name));
  std::sort(names.begin(), names.end());
  for (const auto& name : names) {
    if (only_reason(qdir->get(), name)) continue;
    SlotSize s{name, 0, false};
    if (auto b = slot_bytes(qdir->get(), name, false)) s.bytes = *b;
    if (evict(qdir->get(), s, "the backing store is out of space")) return true;
  }
  return false;
}

bool Quarantine::take_spare(int qdir_fd, const std::string& slot) {
  auto spare_dir = open_beneath(root_fd_, kSpareDir, O_PATH | O_DIRECTORY);
  if (!spare_dir) return false;
  auto spares = read_dir(spare_dir->get());
  if (!spares) return false;
  for (const auto& c : *spares) {
    // Another process sharing B may take the same one first (ENOENT).
    if (move_into_slot(spare_dir->get(), c.name, qdir_fd, slot) == 0) return true;
  }
  return false;
}

void Quarantine::replenish_spares() {
  std::lock_guard lock(mu_);
  replenish_spares_locked();
}

void Quarantine::replenish_spares_locked() {
  if (::mkdirat(root_fd_, std::string(kSpareDir).c_str(), 0700) != 0 && errno != EEXIST) return;
  auto spare_dir = open_beneath(root_fd_, kSpareDir, O_PATH | O_DIRECTORY);
  if (!spare_dir) return;
  auto spares = read_dir(spare_dir->get());
  if (!spares) return;
  const std::string filler(kSpareReasonBytes, ' ');
  for (std::size_t have = spares->size(); have < kSpares; ++have) {
    const std::string name = "spare-" + std::to_string(::getpid()) + "-" + std::to_string(++spare_seq_);
    if (::mkdirat(spare_dir->get(), name.c_str(), 0700) != 0) return;
    // Until its reason.json is allocated it is no spare: taken away again.
    SlotUnderConstruction making(spare_dir->get(), name);
    if (!making.open()) return;
    int raw = ::openat(making.fd(), std::string(kReasonFile).c_str(),
                       O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (raw < 0) return;
    UniqueFd reason(raw);
    making.reason_made();
    if (!write_all_at(reason.get(), filler)) return;
    making.commit();
  }
}

}  // namespace sealfs
