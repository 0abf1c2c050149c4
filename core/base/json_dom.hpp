// RapidJSON DOM parsing with the limits every sealfs reader of JSON needs
// (manifests from an untrusted B, profiles from a file): strict syntax, no
// trailing garbage, bounded nesting, duplicate keys detected. Internal to
// core/: errors carry the caller's errno and message prefix.
#pragma once

#include <rapidjson/document.h>

#include <string>
#include <string_view>
#include <vector>

#include "core/base/result.hpp"

namespace sealfs::json {

// Who is parsing, for errors: e.g. {EBADMSG, "manifest"} → "manifest: …".
struct ErrorStyle {
  int code;
  std::string_view prefix;
  Error operator()(std::string message) const;
};

// Nesting depth of objects/arrays is checked on the raw text before RapidJSON
// sees it, so neither its recursive parser nor the recursive destructor of a
// Document can exhaust the stack on hostile input.
// validate_utf8=false: strings keep whatever bytes they hold (manifests carry
// file names, which are bytes; the caller checks every other string).
Result<rapidjson::Document> parse_document(std::string_view text, int max_depth, const ErrorStyle& err,
                                           bool validate_utf8 = true);

inline std::string_view string_of(const rapidjson::Value& v) { return {v.GetString(), v.GetStringLength()}; }

// Members of an object sorted by key (bytewise, as std::string orders them).
// Duplicate keys are an error: RapidJSON keeps them all, and two readers that
// pick different duplicates must never disagree about what a document says.
using Members = std::vector<const rapidjson::Value::Member*>;
Result<Members> sorted_members(const rapidjson::Value& object, std::string_view where, const ErrorStyle& err);

// A name from an untrusted source made safe for a log line: quoted, control
// bytes, quotes and backslashes escaped as \xNN, cut after 80 bytes.
std::string quoted(std::string_view s);

}  // namespace sealfs::json
