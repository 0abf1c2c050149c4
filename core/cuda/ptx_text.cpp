// PTX recognition and completeness check (see ptx_text.hpp).
#include "core/cuda/ptx_text.hpp"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstddef>
#include <string>
#include <string_view>
#include <utility>

#include "core/base/result.hpp"
#include "core/cuda/byte_reader.hpp"

namespace sealfs::cuda::detail {
namespace {

constexpr std::size_t kSniffBytes = std::size_t{64} * 1024;

Error damaged(std::string what) { return make_error(EBADMSG, "PTX: " + std::move(what)); }

bool is_text_byte(unsigned char c) { return c == '\n' || c == '\r' || c == '\t' || (c >= 0x20 && c < 0x7f); }

// Position just after `directive` when it starts a line (after blanks), else npos.
std::size_t find_directive(std::string_view text, std::string_view directive) {
  for (std::size_t pos = text.find(directive); pos != std::string_view::npos;
       pos = text.find(directive, pos + 1)) {
    std::size_t line_start = pos;
    while (line_start > 0 && (text[line_start - 1] == ' ' || text[line_start - 1] == '\t')) --line_start;
    const bool at_line_start = line_start == 0 || text[line_start - 1] == '\n';
    const std::size_t end = pos + directive.size();
    const bool whole_word = end < text.size() && (text[end] == ' ' || text[end] == '\t');
    if (at_line_start && whole_word) return end;
  }
  return std::string_view::npos;
}

}  // namespace

bool looks_like_ptx(Bytes bytes) {
  const std::size_t n = std::min(bytes.size(), kSniffBytes);
  const std::string_view head(reinterpret_cast<const char*>(bytes.data()), n);
  const std::size_t at = find_directive(head, ".version");
  if (at == std::string_view::npos) return false;
  return std::all_of(head.begin(), head.begin() + static_cast<std::ptrdiff_t>(at),
                     [](char c) { return is_text_byte(static_cast<unsigned char>(c)); });
}

namespace {

// Walks the text once: comments, strings, brace depth. Text cut off inside a
// comment, a string or a block is damage, and so is a byte that is not text.
Status check_body(std::string_view text) {
  int depth = 0;
  enum class State { code, line_comment, block_comment, string } state = State::code;
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    const char next = i + 1 < text.size() ? text[i + 1] : '\0';
    switch (state) {
      case State::code:
        if (c == '/' && next == '/') {
          state = State::line_comment;
          ++i;
        } else if (c == '/' && next == '*') {
          state = State::block_comment;
          ++i;
        } else if (c == '"') {
          state = State::string;
        } else if (c == '{') {
          ++depth;
        } else if (c == '}') {
          if (--depth < 0) return damaged("unbalanced '}'");
        } else if (!is_text_byte(static_cast<unsigned char>(c))) {
          return damaged("binary byte in the text");
        }
        break;
      case State::line_comment:
        if (c == '\n') state = State::code;
        break;
      case State::block_comment:
        if (c == '*' && next == '/') {
          state = State::code;
          ++i;
        }
        break;
      case State::string:
        if (c == '\\') {
          ++i;
        } else if (c == '"') {
          state = State::code;
        } else if (c == '\n') {
          return damaged("unterminated string");
        }
        break;
    }
  }
  if (state == State::block_comment || state == State::string)
    return damaged("ends inside a comment or string (truncated?)");
  if (depth != 0) return damaged("unbalanced braces (truncated?)");
  return {};
}

// The .version and .target directives; the architecture .target names.
Result<PtxInfo> read_target(std::string_view text) {
  const std::size_t version = find_directive(text, ".version");
  if (version == std::string_view::npos) return damaged("no .version directive");
  std::size_t at = find_directive(text, ".target");
  if (at == std::string_view::npos) return damaged("no .target directive");
  while (at < text.size() && (text[at] == ' ' || text[at] == '\t')) ++at;
  if (text.substr(at, 3) != "sm_") return damaged(".target is not sm_NN");
  at += 3;
  PtxInfo info;
  std::size_t digits = 0;
  while (at < text.size() && std::isdigit(static_cast<unsigned char>(text[at])) && digits < 4) {
    info.sm = info.sm * 10 + static_cast<unsigned>(text[at] - '0');
    ++at;
    ++digits;
  }
  if (digits == 0 || info.sm < 10) return damaged("bad .target architecture");
  if (at < text.size() && (text[at] == 'a' || text[at] == 'f')) info.suffix = std::string(1, text[at]);
  return info;
}

}  // namespace

Result<PtxInfo> check_ptx(std::string_view text) {
  while (!text.empty() && text.back() == '\0') text.remove_suffix(1);
  if (text.empty()) return damaged("empty");
  if (text.find('\0') != std::string_view::npos) return damaged("NUL byte inside the text");
  if (auto body = check_body(text); !body) return body.error();
  return read_target(text);
}

}  // namespace sealfs::cuda::detail
