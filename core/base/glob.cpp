#include "core/base/glob.hpp"

#include <cstddef>
#include <string_view>
#include <vector>

namespace sealfs {

namespace {

std::vector<std::string_view> split_components(std::string_view s) {
  std::vector<std::string_view> out;
  if (s.empty()) return out;  // "" is the root: no components
  std::size_t start = 0;
  for (;;) {
    std::size_t slash = s.find('/', start);
    if (slash == std::string_view::npos) {
      out.push_back(s.substr(start));
      return out;
    }
    out.push_back(s.substr(start, slash - start));
    start = slash + 1;
  }
}

// "[abc]", "[a-z]", "[!x]" / "[^x]" at pattern[pi] ('['). On success sets
// *matched and returns the index just past ']'; returns npos when the class is
// not closed, in which case '[' is an ordinary character (as fnmatch does).
std::size_t match_class(std::string_view pattern, std::size_t pi, char c, bool* matched) {
  std::size_t i = pi + 1;
  bool negate = false;
  if (i < pattern.size() && (pattern[i] == '!' || pattern[i] == '^')) {
    negate = true;
    ++i;
  }
  bool hit = false;
  bool first = true;
  while (i < pattern.size() && (pattern[i] != ']' || first)) {
    first = false;
    char lo = pattern[i];
    if (i + 2 < pattern.size() && pattern[i + 1] == '-' && pattern[i + 2] != ']') {
      char hi = pattern[i + 2];
      if (lo <= c && c <= hi) hit = true;
      i += 3;
    } else {
      if (lo == c) hit = true;
      ++i;
    }
  }
  if (i >= pattern.size()) return std::string_view::npos;
  *matched = hit != negate;
  return i + 1;
}

// One component against one component pattern: '*' any run, '?' one
// character, classes. Iterative with a single backtrack point, so it runs in
// O(|pattern| * |name|) at worst and never recurses on hostile input.
bool match_component(std::string_view pattern, std::string_view name) {
  std::size_t pi = 0, ni = 0;
  std::size_t star_pi = std::string_view::npos, star_ni = 0;
  while (ni < name.size()) {
    if (pi < pattern.size()) {
      char p = pattern[pi];
      if (p == '*') {
        star_pi = pi++;
        star_ni = ni;
        continue;
      }
      if (p == '?') {
        ++pi;
        ++ni;
        continue;
      }
      if (p == '[') {
        bool in_class = false;
        std::size_t next = match_class(pattern, pi, name[ni], &in_class);
        if (next != std::string_view::npos) {
          if (in_class) {
            pi = next;
            ++ni;
            continue;
          }
        } else if (name[ni] == '[') {  // unclosed: a literal '['
          ++pi;
          ++ni;
          continue;
        }
      } else if (p == name[ni]) {
        ++pi;
        ++ni;
        continue;
      }
    }
    if (star_pi == std::string_view::npos) return false;
    pi = star_pi + 1;  // let the last '*' swallow one more character
    ni = ++star_ni;
  }
  while (pi < pattern.size() && pattern[pi] == '*') ++pi;
  return pi == pattern.size();
}

// Component lists; '**' matches zero or more whole components. Backtracks to
// the latest '**' only, which is enough because '**' segments are separated by
// fixed-length component runs (same argument as for '*' within a component).
bool match_components(const std::vector<std::string_view>& pat, const std::vector<std::string_view>& path) {
  std::size_t pi = 0, ni = 0;
  std::size_t star_pi = std::string_view::npos, star_ni = 0;
  while (ni < path.size()) {
    if (pi < pat.size()) {
      if (pat[pi] == "**") {
        star_pi = pi++;
        star_ni = ni;
        continue;
      }
      if (match_component(pat[pi], path[ni])) {
        ++pi;
        ++ni;
        continue;
      }
    }
    if (star_pi == std::string_view::npos) return false;
    pi = star_pi + 1;
    ni = ++star_ni;
  }
  while (pi < pat.size() && pat[pi] == "**") ++pi;
  return pi == pat.size();
}

}  // namespace

bool glob_match(std::string_view pattern, std::string_view path) {
  if (pattern.empty()) return path.empty();
  return match_components(split_components(pattern), split_components(path));
}

}  // namespace sealfs
