#include "core/manifest/manifest.hpp"

#include <linux/limits.h>

#include <algorithm>
#include <cerrno>
#include <cstddef>
#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

// RapidJSON does not throw; RAPIDJSON_ASSERT is left at its default and never
// reached, because every access below checks the value's type first.
#include <rapidjson/document.h>
#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

#include "core/base/digest.hpp"
#include "core/base/json_dom.hpp"
#include "core/base/result.hpp"
#include "core/layout/names.hpp"
#include "core/layout/paths.hpp"   // kMaxTreeDepth
#include "core/manifest/keys.hpp"  // is_valid_key_id

namespace sealfs {

namespace {

using JsonValue = rapidjson::Value;
using JsonWriter = rapidjson::Writer<rapidjson::StringBuffer>;
using json::quoted;

// Deepest nesting of objects/arrays accepted anywhere, extra sections
// included (the known sections need 3).
constexpr int kMaxJsonDepth = 16;

constexpr std::string_view kKeyVersion = "sealfs";
constexpr std::string_view kKeyFiles = "files";
constexpr std::string_view kKeyAccept = "accept";
constexpr std::string_view kKeyName = "name";
constexpr std::string_view kKeyMac = "mac";
constexpr std::string_view kKeyMacKey = "key";
constexpr std::string_view kKeyMacHmac = "hmac-sha256";
constexpr std::string_view kKeySha256 = "sha256";
constexpr std::string_view kKeySize = "size";
constexpr std::string_view kKeySymlink = "symlink";

const json::ErrorStyle bad{EBADMSG, "manifest"};

std::string_view view(const JsonValue& v) { return json::string_of(v); }

Result<json::Members> sorted_members(const JsonValue& obj, std::string_view where) {
  return json::sorted_members(obj, where, bad);
}

// Whether d's canonical text parses back to d. RapidJSON 1.1's default number
// parsing can be an ulp off for long mantissas and large exponents (its
// full-precision mode is worse: it reads "0e44" as -1.5e-272), so a manifest
// holding such a number would change value, and bytes, on every round trip.
// Found by manifest_fuzz; sealfs itself writes integers and strings only.
bool reads_back_as_itself(double d) {
  rapidjson::StringBuffer buf;
  JsonWriter w(buf);
  if (!w.Double(d)) return false;
  rapidjson::Document back;
  back.Parse(buf.GetString(), buf.GetSize());
  return !back.HasParseError() && back.IsNumber() && back.GetDouble() == d;
}

// Any JSON value in canonical form: object keys sorted, no spaces. Fails on
// duplicate keys at any level, and on numbers that would not survive it.
Status write_canonical(const JsonValue& v, JsonWriter& w, std::string_view where) {
  switch (v.GetType()) {
    case rapidjson::kObjectType: {
      auto members = sorted_members(v, where);
      if (!members) return members.error();
      w.StartObject();
      for (const auto* m : *members) {
        w.Key(m->name.GetString(), m->name.GetStringLength());
        if (auto s = write_canonical(m->value, w, where); !s) return s;
      }
      w.EndObject();
      return {};
    }
    case rapidjson::kArrayType:
      w.StartArray();
      for (const auto& e : v.GetArray())
        if (auto s = write_canonical(e, w, where); !s) return s;
      w.EndArray();
      return {};
    default:
      if (v.IsDouble() && !reads_back_as_itself(v.GetDouble()))
        return bad(std::string(where) + ": a number with no stable canonical form");
      v.Accept(w);  // scalars: RapidJSON's own shortest form
      return {};
  }
}

Result<FileRecord> parse_record(const JsonValue& v, std::string_view section, std::string_view path) {
  std::string where = std::string(section) + "[" + quoted(path) + "]";
  if (!v.IsObject()) return bad(where + ": not an object");
  auto members = sorted_members(v, where);
  if (!members) return members.error();
  FileRecord rec;
  bool have_size = false;
  for (const auto* m : *members) {
    std::string_view key = view(m->name);
    const JsonValue& val = m->value;
    if (key == kKeySize) {
      // Integers only: 16.0 or 1e3 parse as doubles and are refused.
      if (!val.IsUint64()) return bad(where + ".size: not an unsigned integer");
      if (val.GetUint64() > kMaxManifestFileSize) return bad(where + ".size: larger than the limit");
      rec.size = val.GetUint64();
      have_size = true;
    } else if (key == kKeySha256) {
      if (!val.IsString()) return bad(where + ".sha256: not a string");
      auto digest = sha256_from_hex(view(val));
      if (!digest) return bad(where + ".sha256: not 64 lowercase hex digits");
      rec.sha256 = *digest;
    } else if (key == kKeySymlink) {
      if (!val.IsString()) return bad(where + ".symlink: not a string");
      std::string_view target = view(val);
      if (target.empty() || target.size() >= PATH_MAX || target.find('\0') != std::string_view::npos)
        return bad(where + ".symlink: not a valid symlink target");
      rec.symlink = std::string(target);
    } else {
      return bad(where + ": unknown key " + quoted(key));
    }
  }
  if (!have_size) return bad(where + ": missing \"size\"");
  return rec;
}

Result<std::map<std::string, FileRecord>> parse_file_map(const JsonValue& v, std::string_view section) {
  if (!v.IsObject()) return bad(std::string(section) + ": not an object");
  auto members = sorted_members(v, section);
  if (!members) return members.error();
  std::map<std::string, FileRecord> out;
  for (const auto* m : *members) {
    std::string_view path = view(m->name);
    if (!is_valid_manifest_path(path)) return bad(std::string(section) + ": invalid path " + quoted(path));
    auto rec = parse_record(m->value, section, path);
    if (!rec) return rec.error();
    out.emplace(std::string(path), std::move(*rec));
  }
  return out;
}

std::string render_record(const FileRecord& rec) {
  rapidjson::StringBuffer buf;
  JsonWriter w(buf);
  w.StartObject();  // keys in byte order: sha256 < size < symlink
  if (rec.sha256) {
    std::string hex = to_hex(*rec.sha256);
    w.Key(kKeySha256.data(), static_cast<rapidjson::SizeType>(kKeySha256.size()));
    w.String(hex.data(), static_cast<rapidjson::SizeType>(hex.size()));
  }
  w.Key(kKeySize.data(), static_cast<rapidjson::SizeType>(kKeySize.size()));
  w.Uint64(rec.size);
  if (rec.symlink) {
    w.Key(kKeySymlink.data(), static_cast<rapidjson::SizeType>(kKeySymlink.size()));
    w.String(rec.symlink->data(), static_cast<rapidjson::SizeType>(rec.symlink->size()));
  }
  w.EndObject();
  return {buf.GetString(), buf.GetSize()};
}

std::string render_string(std::string_view s) {
  rapidjson::StringBuffer buf;
  JsonWriter w(buf);
  w.String(s.data(), static_cast<rapidjson::SizeType>(s.size()));
  return {buf.GetString(), buf.GetSize()};
}

std::string render_file_map(const std::map<std::string, FileRecord>& files) {
  std::string out = "{";
  bool first = true;
  for (const auto& [path, rec] : files) {  // std::map: already in byte order
    if (!first) out += ',';
    first = false;
    out += render_string(path);
    out += ':';
    out += render_record(rec);
  }
  out += '}';
  return out;
}

bool is_known_key(std::string_view key) {
  return key == kKeyVersion || key == kKeyFiles || key == kKeyAccept || key == kKeyName || key == kKeyMac;
}

// "mac": {"hmac-sha256": "<64 lowercase hex>", "key": "<key id>"}, nothing else.
Result<ManifestMac> parse_mac(const JsonValue& v) {
  if (!v.IsObject()) return bad("\"mac\" is not an object");
  auto members = sorted_members(v, "mac");
  if (!members) return members.error();
  ManifestMac mac;
  bool have_key = false;
  bool have_hmac = false;
  for (const auto* m : *members) {
    std::string_view key = view(m->name);
    if (key == kKeyMacKey) {
      if (!m->value.IsString() || !is_valid_key_id(view(m->value))) return bad("mac.key: not a key id");
      mac.key = std::string(view(m->value));
      have_key = true;
    } else if (key == kKeyMacHmac) {
      auto hmac = m->value.IsString() ? sha256_from_hex(view(m->value)) : make_error(EINVAL, "");
      if (!hmac) return bad("mac.hmac-sha256: not 64 lowercase hex digits");
      mac.hmac = *hmac;
      have_hmac = true;
    } else {
      return bad("mac: unknown key " + quoted(key));
    }
  }
  if (!have_key || !have_hmac) return bad(R"(mac: needs "key" and "hmac-sha256")");
  return mac;
}

std::string render_mac(const ManifestMac& mac) {
  rapidjson::StringBuffer buf;
  JsonWriter w(buf);
  const std::string hex = to_hex(mac.hmac);
  w.StartObject();  // keys in byte order: hmac-sha256 < key
  w.Key(kKeyMacHmac.data(), static_cast<rapidjson::SizeType>(kKeyMacHmac.size()));
  w.String(hex.data(), static_cast<rapidjson::SizeType>(hex.size()));
  w.Key(kKeyMacKey.data(), static_cast<rapidjson::SizeType>(kKeyMacKey.size()));
  w.String(mac.key.data(), static_cast<rapidjson::SizeType>(mac.key.size()));
  w.EndObject();
  return {buf.GetString(), buf.GetSize()};
}

// Every string in v (keys included) is strict UTF-8. The raw text was checked
// already; this catches what escapes decode to (RapidJSON turns a lone low
// surrogate such as "\udc00" into the bytes of a surrogate, which is not UTF-8).
bool strings_are_utf8(const JsonValue& v) {
  switch (v.GetType()) {
    case rapidjson::kStringType:
      return is_valid_utf8(view(v));
    case rapidjson::kObjectType:
      for (auto it = v.MemberBegin(); it != v.MemberEnd(); ++it)
        if (!is_valid_utf8(view(it->name)) || !strings_are_utf8(it->value)) return false;
      return true;
    case rapidjson::kArrayType:
      for (const auto& e : v.GetArray())
        if (!strings_are_utf8(e)) return false;
      return true;
    default:
      return true;
  }
}

// File names are bytes (POSIX allows any but '/' and NUL), so the places that
// carry them (the keys of "files" and "accept", "name", a record's
// "symlink") hold them verbatim, one spelling per name. Every other string,
// unknown sections included, must be UTF-8.
bool manifest_strings_ok(const JsonValue& doc) {
  if (!doc.IsObject()) return strings_are_utf8(doc);
  for (auto it = doc.MemberBegin(); it != doc.MemberEnd(); ++it) {
    const std::string_view key = view(it->name);
    const JsonValue& v = it->value;
    if ((key == kKeyFiles || key == kKeyAccept) && v.IsObject()) {
      for (auto rec = v.MemberBegin(); rec != v.MemberEnd(); ++rec) {
        if (!rec->value.IsObject()) {
          if (!strings_are_utf8(rec->value)) return false;
          continue;
        }
        for (auto f = rec->value.MemberBegin(); f != rec->value.MemberEnd(); ++f)
          if (view(f->name) != kKeySymlink && (!is_valid_utf8(view(f->name)) || !strings_are_utf8(f->value)))
            return false;
      }
    } else if (key != kKeyName && (!is_valid_utf8(key) || !strings_are_utf8(v))) {
      return false;
    }
  }
  return true;
}

// The checks every manifest text and extra section passes before and after
// RapidJSON reads it (its UTF-8 input stream skips a BOM silently). names:
// a whole manifest, whose file names are bytes (manifest_strings_ok).
Result<rapidjson::Document> parse_strict(std::string_view json, bool names = false) {
  if (json.size() >= 3 && json.substr(0, 3) == "\xEF\xBB\xBF") return bad("starts with a byte-order mark");
  if (!names && !is_valid_utf8(json)) return bad("not valid UTF-8");
  auto doc = json::parse_document(json, kMaxJsonDepth, bad, !names);
  if (!doc) return doc.error();
  if (!(names ? manifest_strings_ok(*doc) : strings_are_utf8(*doc)))
    return bad("a string that is not valid UTF-8");
  return doc;
}

}  // namespace

bool is_valid_utf8(std::string_view s) {
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  const std::size_t n = s.size();
  std::size_t i = 0;
  while (i < n) {
    const unsigned c = p[i];
    if (c < 0x80) {
      ++i;
      continue;
    }
    std::size_t len = 0;
    unsigned lo = 0x80, hi = 0xBF;  // allowed range of the second byte
    if (c >= 0xC2 && c <= 0xDF) {
      len = 2;
    } else if (c >= 0xE0 && c <= 0xEF) {
      len = 3;
      if (c == 0xE0) lo = 0xA0;  // overlong
      if (c == 0xED) hi = 0x9F;  // surrogates
    } else if (c >= 0xF0 && c <= 0xF4) {
      len = 4;
      if (c == 0xF0) lo = 0x90;  // overlong
      if (c == 0xF4) hi = 0x8F;  // above U+10FFFF
    } else {
      return false;  // continuation byte first, C0/C1, F5..FF
    }
    if (n - i < len) return false;
    if (p[i + 1] < lo || p[i + 1] > hi) return false;
    for (std::size_t k = 2; k < len; ++k)
      if (p[i + k] < 0x80 || p[i + k] > 0xBF) return false;
    i += len;
  }
  return true;
}

bool symlink_stays_inside(std::string_view key, std::string_view target) {
  if (target.empty() || target.front() == '/') return false;
  // How far the symlink's own directory lies below the manifest's directory.
  // Manifest paths never pass through symlinks (the verifier opens them
  // without following any), so that directory is a real one at this depth.
  long depth = static_cast<long>(std::count(key.begin(), key.end(), '/'));
  bool descended = false;
  std::size_t start = 0;
  for (;;) {
    std::size_t slash = target.find('/', start);
    std::string_view comp =
        target.substr(start, slash == std::string_view::npos ? target.npos : slash - start);
    if (comp == "..") {
      // ".." only before any name: "a/../.." would climb out of wherever
      // "a" leads (a symlink to ".." one level down makes it the parent of
      // the entry), which no reading of the text alone can bound.
      if (descended || --depth < 0) return false;
    } else if (!comp.empty() && comp != ".") {
      descended = true;
    }
    if (slash == std::string_view::npos) return true;
    start = slash + 1;
  }
}

std::string symlink_destination(std::string_view link_rel, std::string_view target) {
  std::vector<std::string_view> parts;
  auto push_components = [&parts](std::string_view path, bool last_too) {
    std::size_t start = 0;
    for (;;) {
      const std::size_t slash = path.find('/', start);
      if (slash == std::string_view::npos && !last_too) return;
      const std::string_view comp =
          path.substr(start, slash == std::string_view::npos ? path.npos : slash - start);
      if (comp == "..") {
        if (!parts.empty()) parts.pop_back();
      } else if (!comp.empty() && comp != ".") {
        parts.push_back(comp);
      }
      if (slash == std::string_view::npos) return;
      start = slash + 1;
    }
  };
  push_components(link_rel, false);  // the symlink's own directory
  push_components(target, true);
  std::string out;
  for (const auto& p : parts) {
    if (!out.empty()) out.push_back('/');
    out.append(p);
  }
  return out;
}

bool is_valid_manifest_path(std::string_view rel) {
  // No PATH_MAX bound: paths inside B may be longer (R10), and the store
  // reaches them one component at a time. The depth bound is the store's.
  if (rel.empty()) return false;
  std::size_t start = 0;
  for (int depth = 1; depth <= kMaxTreeDepth; ++depth) {
    std::size_t slash = rel.find('/', start);
    std::string_view comp = rel.substr(start, slash == std::string_view::npos ? rel.npos : slash - start);
    if (!is_valid_name(comp)) return false;
    if (slash == std::string_view::npos) return true;
    start = slash + 1;
  }
  return false;
}

Result<std::string> canonical_json(std::string_view json) {
  if (json.size() > kMaxManifestBytes) return bad("JSON text larger than the limit");
  auto doc = parse_strict(json);
  if (!doc) return doc.error();
  rapidjson::StringBuffer buf;
  JsonWriter w(buf);
  if (auto s = write_canonical(*doc, w, "JSON value"); !s) return s.error();
  return std::string(buf.GetString(), buf.GetSize());
}

Result<Manifest> parse_manifest(std::string_view json) {
  if (json.size() > kMaxManifestBytes)
    return bad("larger than " + std::to_string(kMaxManifestBytes) + " bytes");
  auto doc = parse_strict(json, true);
  if (!doc) return doc.error();
  if (!doc->IsObject()) return bad("top level is not an object");
  auto members = sorted_members(*doc, "top level");
  if (!members) return members.error();

  Manifest m;
  bool have_version = false;
  bool have_files = false;
  for (const auto* member : *members) {
    std::string_view key = view(member->name);
    const JsonValue& val = member->value;
    if (key == kKeyVersion) {
      if (!val.IsInt64()) return bad("\"sealfs\" is not an integer");
      if (val.GetInt64() != kManifestVersion)
        return bad("unsupported version " + std::to_string(val.GetInt64()) + " (this build reads " +
                   std::to_string(kManifestVersion) + ")");
      have_version = true;
    } else if (key == kKeyFiles || key == kKeyAccept) {
      auto map = parse_file_map(val, key);
      if (!map) return map.error();
      (key == kKeyFiles ? m.files : m.accept) = std::move(*map);
      have_files = have_files || key == kKeyFiles;
    } else if (key == kKeyName) {
      if (!val.IsString()) return bad("\"name\" is not a string");
      if (!is_valid_name(view(val))) return bad("\"name\" is not a valid file name");
      m.name = std::string(view(val));
    } else if (key == kKeyMac) {
      auto mac = parse_mac(val);
      if (!mac) return mac.error();
      m.mac = std::move(*mac);
    } else {
      rapidjson::StringBuffer buf;
      JsonWriter w(buf);
      if (auto s = write_canonical(val, w, "section " + quoted(key)); !s) return s.error();
      m.extra.emplace(std::string(key), std::string(buf.GetString(), buf.GetSize()));
    }
  }
  if (!have_version) return bad("missing \"sealfs\" version");
  if (!have_files) return bad("missing \"files\"");
  return m;
}

std::string serialize_manifest(const Manifest& manifest, bool with_mac) {
  // Every top-level section rendered to canonical text, then all of them
  // written in key order. Extra sections are re-canonicalised so a caller's
  // spacing can never make two equal manifests differ in bytes.
  std::vector<std::pair<std::string, std::string>> sections;
  sections.emplace_back(kKeyVersion, std::to_string(kManifestVersion));
  sections.emplace_back(kKeyFiles, render_file_map(manifest.files));
  if (!manifest.accept.empty()) sections.emplace_back(kKeyAccept, render_file_map(manifest.accept));
  if (manifest.name) sections.emplace_back(kKeyName, render_string(*manifest.name));
  if (manifest.mac && with_mac) sections.emplace_back(kKeyMac, render_mac(*manifest.mac));
  for (const auto& [key, text] : manifest.extra) {
    if (is_known_key(key)) continue;  // cannot come from parse; would duplicate a key
    auto canonical = canonical_json(text);
    // A caller that stored invalid JSON gets null rather than a manifest that
    // no reader could parse.
    sections.emplace_back(key, canonical ? std::move(*canonical) : std::string("null"));
  }
  std::sort(sections.begin(), sections.end(), [](const auto& a, const auto& b) { return a.first < b.first; });

  std::string out = "{";
  for (std::size_t i = 0; i < sections.size(); ++i) {
    if (i > 0) out += ',';
    out += render_string(sections[i].first);
    out += ':';
    out += sections[i].second;
  }
  out += '}';
  return out;
}

}  // namespace sealfs
