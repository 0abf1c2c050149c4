#include "core/manifest/keys.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <functional>
#include <set>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/base/hmac.hpp"
#include "core/base/result.hpp"
#include "core/base/unique_fd.hpp"

namespace sealfs {
namespace {

int hex_digit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

bool parse_secret(std::string_view hex, HmacKey& out) {
  if (hex.size() != out.size() * 2) return false;
  for (std::size_t i = 0; i < out.size(); ++i) {
    const int hi = hex_digit(hex[2 * i]);
    const int lo = hex_digit(hex[2 * i + 1]);
    if (hi < 0 || lo < 0) return false;
    out[i] = static_cast<std::uint8_t>(hi << 4 | lo);
  }
  return true;
}

bool is_blank(char c) { return c == ' ' || c == '\t' || c == '\r'; }

// The line's fields split at runs of blanks.
std::vector<std::string_view> fields_of(std::string_view line) {
  std::vector<std::string_view> out;
  std::size_t i = 0;
  while (i < line.size()) {
    while (i < line.size() && is_blank(line[i])) ++i;
    const std::size_t start = i;
    while (i < line.size() && !is_blank(line[i])) ++i;
    if (i > start) out.push_back(line.substr(start, i - start));
  }
  return out;
}

std::string octal_mode(mode_t mode) {
  char buf[8];
  std::snprintf(buf, sizeof buf, "%04o", static_cast<unsigned>(mode & 07777));
  return buf;
}

}  // namespace

KeyRing::KeyRing(std::vector<ManifestKey> keys) : keys_(std::move(keys)) {}

const ManifestKey* KeyRing::find(std::string_view id) const {
  for (const auto& k : keys_)
    if (k.id == id) return &k;
  return nullptr;
}

bool is_valid_key_id(std::string_view id) {
  if (id.empty() || id.size() > kMaxKeyIdLength) return false;
  for (char c : id) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
                    c == '_' || c == '-';
    if (!ok) return false;
  }
  return true;
}

Result<std::vector<ManifestKey>> parse_key_file(std::string_view text, std::string_view where) {
  std::vector<ManifestKey> keys;
  std::set<std::string, std::less<>> ids;
  const std::string at = std::string(where) + ": line ";
  std::size_t start = 0;
  for (int line_no = 1; start < text.size(); ++line_no) {
    std::size_t end = text.find('\n', start);
    if (end == std::string_view::npos) end = text.size();
    const std::string_view line = text.substr(start, end - start);
    start = end + 1;
    const auto fields = fields_of(line);
    if (fields.empty() || fields.front().front() == '#') continue;
    const std::string n = std::to_string(line_no);
    if (fields.size() != 2) return make_error(EINVAL, at + n + ": expected '<key-id> <64 hex digits>'");
    if (!is_valid_key_id(fields[0]))
      return make_error(EINVAL, at + n + ": key id must be 1 to 64 of A-Z a-z 0-9 . _ -");
    if (ids.count(fields[0]) != 0)
      return make_error(EINVAL, at + n + ": key id '" + std::string(fields[0]) + "' appears twice");
    ManifestKey key;
    key.id = std::string(fields[0]);
    if (!parse_secret(fields[1], key.secret))
      return make_error(EINVAL, at + n + ": key '" + key.id + "' is not 32 bytes (64 hex digits)");
    ids.insert(key.id);
    keys.push_back(std::move(key));
  }
  if (keys.empty()) return make_error(EINVAL, std::string(where) + ": no keys");
  return keys;
}

Result<std::vector<ManifestKey>> load_key_file(const std::string& path) {
  const std::string where = "key file " + path;
  int raw = ::open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
  if (raw < 0) return make_error(errno, where + ": " + std::strerror(errno));
  UniqueFd fd(raw);
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0) return make_error(errno, where + ": " + std::strerror(errno));
  if (!S_ISREG(st.st_mode)) return make_error(EINVAL, where + ": not a regular file");
  if (st.st_uid != ::geteuid())
    return make_error(EPERM, where + ": owned by uid " + std::to_string(st.st_uid) + ", not by uid " +
                                 std::to_string(::geteuid()) + " that runs sealfs");
  if ((st.st_mode & 077) != 0)
    return make_error(
        EPERM, where + ": mode " + octal_mode(st.st_mode) + " lets group or others at it (chmod 600 it)");
  if (static_cast<std::uint64_t>(st.st_size) > kMaxKeyFileBytes)
    return make_error(EINVAL, where + ": larger than " + std::to_string(kMaxKeyFileBytes) + " bytes");
  std::string text(static_cast<std::size_t>(st.st_size), '\0');
  std::size_t done = 0;
  while (done < text.size()) {
    ssize_t n = ::pread(fd.get(), text.data() + done, text.size() - done, static_cast<off_t>(done));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return make_error(errno, where + ": " + std::strerror(errno));
    if (n == 0) break;
    done += static_cast<std::size_t>(n);
  }
  text.resize(done);
  auto keys = parse_key_file(text, where);
  wipe(std::span<std::uint8_t>(reinterpret_cast<std::uint8_t*>(text.data()), text.size()));
  return keys;
}

}  // namespace sealfs
