// Keys for the tests of authenticated manifests (-o key_file): key-file
// lines, key files with the mode sealfs demands, and key rings built from
// them. Secrets are derived from a seed byte, so each test names its keys.
#pragma once

#include <sys/stat.h>

#include <memory>
#include <string>
#include <vector>

#include "core/manifest/keys.hpp"
#include "tests/support/temp_dir.hpp"

namespace sealfs::test {

// "<id> <64 hex digits>", the secret's bytes seed, seed+1, …
inline std::string key_line(const std::string& id, unsigned seed) {
  static const char* digits = "0123456789abcdef";
  std::string hex;
  for (unsigned i = 0; i < 32; ++i) {
    const unsigned b = (seed + i) & 0xffu;
    hex += digits[b >> 4];
    hex += digits[b & 0xfu];
  }
  return id + " " + hex;
}

// A key file at path holding text, mode 0600 (what sealfs accepts).
inline void write_key_file(const std::string& path, const std::string& text) {
  write_file(path, text, 0600);
  ::chmod(path.c_str(), 0600);
}

// A key ring from key-file lines (the first signs); empty pointer when the
// lines do not parse.
inline std::shared_ptr<const KeyRing> key_ring(const std::vector<std::string>& lines) {
  std::string text;
  for (const auto& l : lines) text += l + "\n";
  auto keys = parse_key_file(text, "test keys");
  if (!keys) return nullptr;
  return std::make_shared<const KeyRing>(std::move(*keys));
}

}  // namespace sealfs::test
