#include "core/writers/seal_journal.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <ctime>
#include <fstream>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>
#include <utility>
#include <vector>

#include "core/base/result.hpp"
#include "core/base/unique_fd.hpp"
#include "core/layout/names.hpp"

namespace sealfs {
namespace {

constexpr std::string_view kMagic = "sealfs-journal";
constexpr std::string_view kVersion = "1";
// A path longer than this is no path a daemon recorded (R10 allows deep
// paths, not unbounded lines).
constexpr std::size_t kMaxRel = std::size_t{64} * 1024;

// Bytes a path may hold as they are; every other byte is %XX.
bool plain(unsigned char c) { return c > 0x20 && c < 0x7f && c != '%'; }

std::string escape(std::string_view rel) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out;
  out.reserve(rel.size());
  for (const char ch : rel) {
    const auto c = static_cast<unsigned char>(ch);
    if (plain(c)) {
      out += ch;
    } else {
      out += '%';
      out += kHex[c >> 4];
      out += kHex[c & 0xf];
    }
  }
  return out;
}

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

std::optional<std::string> unescape(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (std::size_t i = 0; i < text.size(); ++i) {
    const auto c = static_cast<unsigned char>(text[i]);
    if (c == '%') {
      if (i + 2 >= text.size()) return std::nullopt;
      const int hi = hex_value(text[i + 1]);
      const int lo = hex_value(text[i + 2]);
      if (hi < 0 || lo < 0) return std::nullopt;
      out += static_cast<char>((hi << 4) | lo);
      i += 2;
    } else if (plain(c)) {
      out += static_cast<char>(c);
    } else {
      return std::nullopt;
    }
  }
  return out;
}

std::vector<std::string_view> fields(std::string_view line) {
  std::vector<std::string_view> out;
  while (!line.empty()) {
    const auto space = line.find(' ');
    out.push_back(line.substr(0, space));
    if (space == std::string_view::npos) break;
    line.remove_prefix(space + 1);
  }
  return out;
}

template <class T>
bool number(std::string_view text, T& value) {
  if (text.empty()) return false;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  return ec == std::errc{} && end == text.data() + text.size();
}

bool timespec_of(std::string_view s, std::string_view ns, struct timespec& t) {
  std::int64_t sec = 0;
  std::int64_t nsec = 0;
  if (!number(s, sec) || !number(ns, nsec) || nsec < 0 || nsec >= 1000000000) return false;
  t.tv_sec = static_cast<time_t>(sec);
  t.tv_nsec = static_cast<long>(nsec);
  return true;
}

std::optional<JournalHeader> parse_header(std::string_view line) {
  const auto f = fields(line);
  if (f.size() != 5 || f[0] != kMagic || f[1] != kVersion || f[3].empty() || f[4].empty())
    return std::nullopt;
  JournalHeader h;
  if (!number(f[2], h.pid) || h.pid <= 0) return std::nullopt;
  h.boot_id = std::string(f[3]);
  h.device = std::string(f[4]);
  return h;
}

// A C line's fields after "C": seq, then the record. Empty when malformed.
std::optional<std::pair<std::uint64_t, JournalRecord>> parse_close(const std::vector<std::string_view>& f,
                                                                   bool& refused) {
  if (f.size() != 10) return std::nullopt;
  std::uint64_t seq = 0;
  std::uint64_t dev = 0;
  std::uint64_t ino = 0;
  std::int64_t size = 0;
  JournalRecord r;
  if (!number(f[1], seq) || !number(f[2], dev) || !number(f[3], ino) || !number(f[4], size) || size < 0 ||
      !timespec_of(f[5], f[6], r.stamp.mtime) || !timespec_of(f[7], f[8], r.stamp.ctime))
    return std::nullopt;
  auto rel = unescape(f[9]);
  if (!rel) return std::nullopt;
  if (!journal_rel_acceptable(*rel)) {
    refused = true;
    return std::nullopt;
  }
  r.stamp.dev = static_cast<dev_t>(dev);
  r.stamp.ino = static_cast<ino_t>(ino);
  r.stamp.size = static_cast<off_t>(size);
  r.rel = std::move(*rel);
  return std::pair{seq, std::move(r)};
}

Status write_all_at(int fd, std::string_view bytes, off_t off) {
  while (!bytes.empty()) {
    const ssize_t n = ::pwrite(fd, bytes.data(), bytes.size(), off);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return errno_error("journal write");
    if (n == 0) return make_error(EIO, "journal write: nothing written");
    bytes.remove_prefix(static_cast<std::size_t>(n));
    off += n;
  }
  return {};
}

}  // namespace

std::string format_header(const JournalHeader& header) {
  return std::string(kMagic) + " " + std::string(kVersion) + " " + std::to_string(header.pid) + " " +
         (header.boot_id.empty() ? "-" : header.boot_id) + " " +
         (header.device.empty() ? "-" : header.device) + "\n";
}

std::string format_close(std::uint64_t seq, const JournalRecord& r) {
  const Stamp& s = r.stamp;
  return "C " + std::to_string(seq) + " " + std::to_string(static_cast<std::uint64_t>(s.dev)) + " " +
         std::to_string(static_cast<std::uint64_t>(s.ino)) + " " +
         std::to_string(static_cast<std::int64_t>(s.size)) + " " +
         std::to_string(static_cast<std::int64_t>(s.mtime.tv_sec)) + " " + std::to_string(s.mtime.tv_nsec) +
         " " + std::to_string(static_cast<std::int64_t>(s.ctime.tv_sec)) + " " +
         std::to_string(s.ctime.tv_nsec) + " " + escape(r.rel) + "\n";
}

std::string format_done(std::uint64_t seq) { return "D " + std::to_string(seq) + "\n"; }

bool journal_rel_acceptable(std::string_view rel) {
  if (rel.empty() || rel.size() > kMaxRel || rel.front() == '/') return false;
  while (!rel.empty()) {
    const auto slash = rel.find('/');
    const std::string_view part = rel.substr(0, slash);
    if (!is_valid_name(part) || is_reserved_name(part)) return false;
    if (slash == std::string_view::npos) break;
    rel.remove_prefix(slash + 1);
    if (rel.empty()) return false;  // a trailing '/'
  }
  return true;
}

namespace {

// The records of a journal's body, line by line: the latest close of each
// file and whether it is done.
class BodyParser {
 public:
  explicit BodyParser(JournalText& out) : out_(out) {}

  void line(std::string_view line) {
    const auto f = fields(line);
    if (f.size() == 2 && f[0] == "D") return done(f[1]);
    if (!f.empty() && f[0] == "C") return close(f);
    ++out_.malformed;
  }

  void finish() {
    std::map<std::uint64_t, JournalRecord> ordered;
    for (auto& [key, l] : latest_)
      if (!l.done) ordered.emplace(l.seq, std::move(l.record));
    for (auto& [seq, record] : ordered) out_.pending.push_back(std::move(record));
  }

 private:
  using Key = std::pair<dev_t, ino_t>;
  struct Latest {
    std::uint64_t seq = 0;
    JournalRecord record;
    bool done = false;
  };

  void done(std::string_view seq_text) {
    std::uint64_t seq = 0;
    if (!number(seq_text, seq)) {
      ++out_.malformed;
      return;
    }
    // Only the latest close of a file counts: a done mark of an older one
    // (left behind by a compaction cut short) leaves a later close pending.
    if (auto it = by_seq_.find(seq); it != by_seq_.end()) {
      auto& l = latest_[it->second];
      if (l.seq == seq) l.done = true;
    }
  }

  void close(const std::vector<std::string_view>& f) {
    bool refused = false;
    auto c = parse_close(f, refused);
    if (!c) {
      ++(refused ? out_.refused : out_.malformed);
      return;
    }
    const Key key{c->second.stamp.dev, c->second.stamp.ino};
    by_seq_[c->first] = key;
    auto& l = latest_[key];
    if (l.record.rel.empty() || c->first > l.seq) l = Latest{c->first, std::move(c->second), false};
  }

  JournalText& out_;
  std::map<Key, Latest> latest_;
  std::map<std::uint64_t, Key> by_seq_;
};

}  // namespace

JournalText parse_journal(std::string_view text) {
  JournalText out;
  BodyParser body(out);
  bool first = true;
  while (!text.empty()) {
    const auto nl = text.find('\n');
    if (nl == std::string_view::npos) {  // torn: the daemon died inside its write
      ++out.malformed;
      break;
    }
    const std::string_view line = text.substr(0, nl);
    text.remove_prefix(nl + 1);
    if (!first) {
      body.line(line);
      continue;
    }
    first = false;
    auto header = parse_header(line);
    if (!header) {
      ++out.malformed;
      return out;  // not a journal this daemon can read: nothing in it is trusted
    }
    out.headed = true;
    out.header = std::move(*header);
  }
  body.finish();
  return out;
}

std::string this_boot_id() {
  std::ifstream in("/proc/sys/kernel/random/boot_id");
  std::string id;
  if (!std::getline(in, id)) return {};
  for (const char c : id)
    if (!plain(static_cast<unsigned char>(c))) return {};
  return id;
}

Result<UniqueFd> open_journal_dir(int root_fd) {
  UniqueFd state(
      ::openat(root_fd, std::string(kStateDir).c_str(), O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (!state) return errno_error("open B/.sealfs");
  const std::string name(kJournalDir.substr(kStateDir.size() + 1));
  if (::mkdirat(state.get(), name.c_str(), 0700) != 0 && errno != EEXIST) return errno_error("mkdir journal");
  UniqueFd dir(::openat(state.get(), name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (!dir) return errno_error("open journal");
  return dir;
}

Result<std::unique_ptr<SealJournal>> SealJournal::create(int dir_fd, const JournalHeader& header) {
  UniqueFd dir(::fcntl(dir_fd, F_DUPFD_CLOEXEC, 0));
  if (!dir) return errno_error("dup journal dir");
  const auto now = std::chrono::system_clock::now().time_since_epoch();
  const std::string base = std::to_string(header.pid) + "-" +
                           std::to_string(std::chrono::duration_cast<std::chrono::nanoseconds>(now).count());
  const std::string name = base + std::string(kJournalSuffix);
  const std::string made = base + ".new";
  UniqueFd fd(::openat(dir.get(), made.c_str(), O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600));
  if (!fd) return errno_error("create journal " + made);
  const std::string head = format_header(header);
  Status ok;
  if (::flock(fd.get(), LOCK_EX | LOCK_NB) != 0) ok = errno_error("lock journal");
  if (ok) ok = write_all_at(fd.get(), head, 0);
  if (ok && ::renameat(dir.get(), made.c_str(), dir.get(), name.c_str()) != 0)
    ok = errno_error("name journal");
  if (!ok) {
    ::unlinkat(dir.get(), made.c_str(), 0);
    return ok.error();
  }
  return std::unique_ptr<SealJournal>(new SealJournal(std::move(dir), std::move(fd), name, head));
}

SealJournal::SealJournal(UniqueFd dir_fd, UniqueFd fd, std::string name, std::string header)
    : dir_fd_(std::move(dir_fd)),
      fd_(std::move(fd)),
      name_(std::move(name)),
      header_(std::move(header)),
      end_(static_cast<off_t>(header_.size())) {}

SealJournal::~SealJournal() {
  std::lock_guard lock(mu_);
  // Still locked while it goes: a replay never takes a journal half removed.
  // Records left pending are the next daemon's to finish.
  if (pending_.empty()) ::unlinkat(dir_fd_.get(), name_.c_str(), 0);
}

Status SealJournal::append(const std::string& line) {
  Status written = write_all_at(fd_.get(), line, end_);
  if (!written) {
    // A short write (ENOSPC) would leave a torn line the next record runs
    // into: cut back to the last whole one.
    while (::ftruncate(fd_.get(), end_) != 0 && errno == EINTR) {
    }
    return written;
  }
  end_ += static_cast<off_t>(line.size());
  return {};
}

Status SealJournal::closed(const JournalRecord& record) {
  std::lock_guard lock(mu_);
  const std::uint64_t seq = next_seq_++;
  std::string line = format_close(seq, record);
  if (Status s = append(line); !s) return s;
  pending_[{record.stamp.dev, record.stamp.ino}] = Pending{seq, std::move(line), record.stamp};
  return {};
}

Status SealJournal::attributes_set(const JournalRecord& record, bool times_set) {
  std::lock_guard lock(mu_);
  auto it = pending_.find({record.stamp.dev, record.stamp.ino});
  if (it == pending_.end()) return {};
  const Stamp& was = it->second.stamp;
  const bool same_mtime =
      was.mtime.tv_sec == record.stamp.mtime.tv_sec && was.mtime.tv_nsec == record.stamp.mtime.tv_nsec;
  if (was.size != record.stamp.size || (!times_set && !same_mtime)) return {};
  const std::uint64_t seq = next_seq_++;
  std::string line = format_close(seq, record);
  if (Status s = append(line); !s) return s;
  it->second = Pending{seq, std::move(line), record.stamp};
  return {};
}

void SealJournal::done(dev_t dev, ino_t ino) {
  std::lock_guard lock(mu_);
  auto it = pending_.find({dev, ino});
  if (it == pending_.end()) return;
  const std::uint64_t seq = it->second.seq;
  pending_.erase(it);
  // Nothing pending: back to the header alone, once past kCutBackAt (a
  // truncate costs about three appends on ext4: not at every close).
  if (pending_.empty() && end_ > kCutBackAt &&
      ::ftruncate(fd_.get(), static_cast<off_t>(header_.size())) == 0) {
    end_ = static_cast<off_t>(header_.size());
    return;
  }
  // A failed mark leaves a record a replay checks by its stamp: at worst it
  // seals again a file unchanged since a normal close.
  (void)append(format_done(seq));
  if (end_ > kCompactAt) compact();
}

void SealJournal::compact() {
  std::string text = header_;
  for (const auto& [key, p] : pending_) text += p.line;
  if (static_cast<off_t>(text.size()) * 2 > end_) return;  // mostly pending still: not worth it
  // Written over the start, then cut: a daemon killed in between leaves the
  // pending records whole, followed by old lines whose seqs are superseded or
  // done (a torn one is ignored).
  if (!write_all_at(fd_.get(), text, 0)) return;
  while (::ftruncate(fd_.get(), static_cast<off_t>(text.size())) != 0) {
    if (errno != EINTR) return;
  }
  end_ = static_cast<off_t>(text.size());
}

bool SealJournal::pending(dev_t dev, ino_t ino) const {
  std::lock_guard lock(mu_);
  return pending_.count({dev, ino}) != 0;
}

std::size_t SealJournal::pending_count() const {
  std::lock_guard lock(mu_);
  return pending_.size();
}

off_t SealJournal::size() const {
  struct stat st {};
  return ::fstat(fd_.get(), &st) == 0 ? st.st_size : -1;
}

}  // namespace sealfs
