#include "core/base/json_dom.hpp"

#include <rapidjson/error/en.h>

#include <algorithm>
#include <cstdio>
#include <string>
#include <string_view>
#include <utility>

#include "core/base/result.hpp"

namespace sealfs::json {

Error ErrorStyle::operator()(std::string message) const {
  return make_error(code, std::string(prefix) + ": " + std::move(message));
}

namespace {

// Follows JSON's string rules exactly as far as RapidJSON reads them (an
// escape skips one character), so on valid text the count is exact and on
// invalid text RapidJSON stops at or before the point where it could differ.
bool depth_within(std::string_view text, int max_depth) {
  int depth = 0;
  bool in_string = false;
  for (std::size_t i = 0; i < text.size(); ++i) {
    char c = text[i];
    if (in_string) {
      if (c == '\\') {
        ++i;
      } else if (c == '"') {
        in_string = false;
      }
    } else if (c == '"') {
      in_string = true;
    } else if (c == '{' || c == '[') {
      if (++depth > max_depth) return false;
    } else if (c == '}' || c == ']') {
      --depth;
    }
  }
  return true;
}

}  // namespace

Result<rapidjson::Document> parse_document(std::string_view text, int max_depth, const ErrorStyle& err,
                                           bool validate_utf8) {
  if (!depth_within(text, max_depth))
    return err("nested deeper than " + std::to_string(max_depth) + " levels");
  rapidjson::Document doc;
  // Default flags: strict JSON; anything but whitespace after the root value
  // is an error (kParseErrorDocumentRootNotSingular), so no trailing garbage.
  // Strings must be valid UTF-8 (kParseValidateEncodingFlag) unless asked not to.
  if (validate_utf8)
    doc.Parse<rapidjson::kParseDefaultFlags | rapidjson::kParseValidateEncodingFlag>(text.data(),
                                                                                     text.size());
  else
    doc.Parse<rapidjson::kParseDefaultFlags>(text.data(), text.size());
  if (doc.HasParseError()) {
    return err("invalid JSON at byte " + std::to_string(doc.GetErrorOffset()) + ": " +
               rapidjson::GetParseError_En(doc.GetParseError()));
  }
  return doc;
}

Result<Members> sorted_members(const rapidjson::Value& object, std::string_view where,
                               const ErrorStyle& err) {
  Members members;
  members.reserve(object.MemberCount());
  for (auto it = object.MemberBegin(); it != object.MemberEnd(); ++it) members.push_back(&*it);
  std::sort(members.begin(), members.end(),
            [](const auto* a, const auto* b) { return string_of(a->name) < string_of(b->name); });
  for (std::size_t i = 1; i < members.size(); ++i) {
    if (string_of(members[i - 1]->name) == string_of(members[i]->name))
      return err("duplicate key " + quoted(string_of(members[i]->name)) + " in " + std::string(where));
  }
  return members;
}

std::string quoted(std::string_view s) {
  constexpr std::size_t kMaxShown = 80;
  std::string out = "\"";
  for (std::size_t i = 0; i < s.size() && i < kMaxShown; ++i) {
    auto c = static_cast<unsigned char>(s[i]);
    if (c < 0x20 || c == 0x7f || c == '"' || c == '\\') {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02x", static_cast<unsigned>(c));
      out += buf;
    } else {
      out.push_back(static_cast<char>(c));
    }
  }
  if (s.size() > kMaxShown) out += "...";
  out += '"';
  return out;
}

}  // namespace sealfs::json
