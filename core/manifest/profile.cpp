#include "core/manifest/profile.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/base/glob.hpp"
#include "core/base/json_dom.hpp"
#include "core/base/result.hpp"
#include "core/base/unique_fd.hpp"

namespace sealfs {

namespace {

// A profile is a few lines of JSON; anything bigger is a wrong file.
constexpr std::size_t kMaxProfileBytes = 1u << 20;
// {"validators":[{…}]} needs 3 levels.
constexpr int kMaxProfileDepth = 4;

constexpr std::string_view kKnownBuiltins = "generic, tilelang, triton";

const json::ErrorStyle bad{EINVAL, "profile"};

using json::quoted;
using JsonValue = rapidjson::Value;

// errno of the call that just failed, with its text in the message.
Error system_error(const std::string& context) {
  int e = errno;
  return make_error(e, context + ": " + std::strerror(e));
}

bool any_match(const std::vector<std::string>& globs, std::string_view rel) {
  return std::any_of(globs.begin(), globs.end(), [&](const std::string& g) { return glob_match(g, rel); });
}

// Globs are matched against relative paths: a leading '/' could never match,
// an empty one only the root, NUL cannot be in a path. All are user mistakes.
Status check_glob(std::string_view glob, const std::string& field) {
  if (glob.empty()) return bad(field + ": empty glob");
  if (glob.front() == '/')
    return bad(field + ": glob " + quoted(glob) + " is absolute (globs are relative to the cache root)");
  if (glob.find('\0') != std::string_view::npos) return bad(field + ": glob contains NUL");
  return {};
}

Result<std::vector<std::string>> parse_globs(const JsonValue& v, const std::string& field) {
  if (!v.IsArray()) return bad(field + ": not an array of globs");
  std::vector<std::string> out;
  for (rapidjson::SizeType i = 0; i < v.Size(); ++i) {
    std::string where = field + "[" + std::to_string(i) + "]";
    if (!v[i].IsString()) return bad(where + ": not a string");
    if (auto s = check_glob(json::string_of(v[i]), where); !s) return s.error();
    out.emplace_back(json::string_of(v[i]));
  }
  return out;
}

Result<std::vector<ValidatorRule>> parse_validators(const JsonValue& v) {
  if (!v.IsArray()) return bad("validators: not an array");
  std::vector<ValidatorRule> out;
  for (rapidjson::SizeType i = 0; i < v.Size(); ++i) {
    std::string where = "validators[" + std::to_string(i) + "]";
    if (!v[i].IsObject()) return bad(where + ": not an object {\"glob\":…,\"validator\":…}");
    auto members = json::sorted_members(v[i], where, bad);
    if (!members) return members.error();
    ValidatorRule rule;
    bool have_glob = false, have_validator = false;
    for (const auto* m : *members) {
      std::string_view key = json::string_of(m->name);
      std::string field = where + "." + std::string(key);
      if (key != "glob" && key != "validator") return bad(where + ": unknown key " + quoted(key));
      if (!m->value.IsString()) return bad(field + ": not a string");
      std::string_view text = json::string_of(m->value);
      if (key == "glob") {
        if (auto s = check_glob(text, field); !s) return s.error();
        rule.glob = std::string(text);
        have_glob = true;
      } else {
        // Only the syntax is checked here; whether the name is registered is
        // decided by the store against its ValidatorRegistry when it opens,
        // so a profile can name a validator this build lacks and fail there.
        if (text.empty() || text.find('\0') != std::string_view::npos)
          return bad(field + ": empty or invalid name");
        rule.validator = std::string(text);
        have_validator = true;
      }
    }
    if (!have_glob) return bad(where + ": missing \"glob\"");
    if (!have_validator) return bad(where + ": missing \"validator\"");
    out.push_back(std::move(rule));
  }
  return out;
}

Profile generic_profile() {
  Profile p;
  p.name = "generic";
  return p;
}

Profile tilelang_profile() {
  Profile p;
  p.name = "tilelang";
  // tmp/ holds TileLang's temp files before os.replace; .staging/ holds a
  // kernel directory being assembled before the rename that publishes it.
  p.volatile_globs = {"tmp/**", "**/.staging/**"};
  // Sources are read lazily and only for display/debug: size is enough.
  p.size_only_globs = {"**/device_kernel.*", "**/host_kernel.*", "**/launcher.cpp"};
  p.validators = {{"**/*.so", "cuda"}, {"**/*.cubin", "cuda"}, {"**/*.fatbin", "cuda"}};
  return p;
}

Profile triton_profile() {
  Profile p;
  p.name = "triton";
  // triton/runtime/cache.py FileCacheManager.put writes each file into
  // <cache>/<key>/tmp.pid_<pid>_<uuid>/<file>, then os.replace()s it into
  // <cache>/<key>/ and removes the temp directory.
  p.volatile_globs = {"**/tmp.pid_*/**"};
  p.validators = {{"**/*.cubin", "cuda"}};
  return p;
}

}  // namespace

bool Profile::is_volatile(std::string_view rel) const {
  // The path itself, then each ancestor ("a/b/c" → "a/b" → "a").
  for (;;) {
    if (any_match(volatile_globs, rel)) return true;
    std::size_t slash = rel.rfind('/');
    if (slash == std::string_view::npos) return false;
    rel = rel.substr(0, slash);
  }
}

bool Profile::is_size_only(std::string_view rel) const { return any_match(size_only_globs, rel); }

std::vector<std::string> Profile::validators_for(std::string_view rel) const {
  std::vector<std::string> out;
  for (const auto& rule : validators) {
    if (glob_match(rule.glob, rel) && std::find(out.begin(), out.end(), rule.validator) == out.end())
      out.push_back(rule.validator);
  }
  return out;
}

Result<Profile> builtin_profile(std::string_view name) {
  if (name == "generic") return generic_profile();
  if (name == "tilelang") return tilelang_profile();
  if (name == "triton") return triton_profile();
  return make_error(ENOENT, "profile: no built-in profile " + quoted(name) +
                                " (known: " + std::string(kKnownBuiltins) + ")");
}

Result<Profile> parse_profile(std::string_view text) {
  if (text.size() > kMaxProfileBytes)
    return bad("larger than " + std::to_string(kMaxProfileBytes) + " bytes");
  auto doc = json::parse_document(text, kMaxProfileDepth, bad);
  if (!doc) return doc.error();
  if (!doc->IsObject()) return bad("top level is not an object");
  auto members = json::sorted_members(*doc, "top level", bad);
  if (!members) return members.error();

  Profile p;
  for (const auto* m : *members) {
    std::string_view key = json::string_of(m->name);
    const JsonValue& v = m->value;
    if (key == "name") {
      if (!v.IsString()) return bad("name: not a string");
      p.name = std::string(json::string_of(v));
    } else if (key == "volatile" || key == "size_only") {
      auto globs = parse_globs(v, std::string(key));
      if (!globs) return globs.error();
      (key == "volatile" ? p.volatile_globs : p.size_only_globs) = std::move(*globs);
    } else if (key == "validators") {
      auto rules = parse_validators(v);
      if (!rules) return rules.error();
      p.validators = std::move(*rules);
    } else if (key == "max_file_size") {
      if (!v.IsUint64() || v.GetUint64() == 0) return bad("max_file_size: not a positive integer (bytes)");
      p.max_file_size = v.GetUint64();
    } else {
      return bad("unknown key " + quoted(key) +
                 " (known: name, volatile, size_only, validators, max_file_size)");
    }
  }
  return p;
}

Result<Profile> load_profile_file(const std::string& path) {
  // Read by path on purpose: the profile is named by the administrator on the
  // command line, outside B. O_NOFOLLOW is not used so a symlinked profile
  // (e.g. /etc/sealfs/profile.json → …) works.
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd) return system_error("profile " + path + ": open");
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0) return system_error("profile " + path + ": fstat");
  if (!S_ISREG(st.st_mode)) return make_error(EINVAL, "profile " + path + ": not a regular file");

  std::string text;
  char buf[16384];
  for (;;) {
    ssize_t n = ::read(fd.get(), buf, sizeof buf);
    if (n < 0) {
      if (errno == EINTR) continue;
      return system_error("profile " + path + ": read");
    }
    if (n == 0) break;
    // The bound is enforced while reading, so a huge file is never held whole.
    if (text.size() + static_cast<std::size_t>(n) > kMaxProfileBytes)
      return make_error(EINVAL,
                        "profile " + path + ": larger than " + std::to_string(kMaxProfileBytes) + " bytes");
    text.append(buf, static_cast<std::size_t>(n));
  }

  auto p = parse_profile(text);
  if (!p) return make_error(p.error().code, p.error().message + " (in " + path + ")");
  if (p->name.empty()) p->name = path;  // errors and `sealfs status` name it somehow
  return p;
}

Result<Profile> resolve_profile(std::string_view name_or_path) {
  bool is_path = name_or_path.find('/') != std::string_view::npos ||
                 (name_or_path.size() >= 5 && name_or_path.substr(name_or_path.size() - 5) == ".json");
  if (is_path) return load_profile_file(std::string(name_or_path));
  return builtin_profile(name_or_path);
}

}  // namespace sealfs
