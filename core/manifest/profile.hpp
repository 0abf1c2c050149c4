// Profiles: which paths are volatile, which are size-only, which validators
// run where. Built-ins: generic, tilelang (and more as real caches need).
//
// JSON form:
// {"name":"tilelang","volatile":["tmp/**","**/.staging/**"],
//  "size_only":["**/device_kernel.*","**/host_kernel.*","**/launcher.cpp"],
//  "validators":[{"glob":"**/*.so","validator":"cuda"}],
//  "max_file_size":4294967296}
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/base/result.hpp"

namespace sealfs {

struct ValidatorRule {
  std::string glob;
  std::string validator;  // a name known to the validator registry (core/verify/validator.hpp)
  bool operator==(const ValidatorRule&) const = default;
};

// Hashed files larger than this are damage (R2: size is evidence), never
// hashed: one planted entry cannot make the daemon read terabytes (a sparse
// 100 GiB kernel_lib.so costs no disk). Real cache artefacts are far smaller.
inline constexpr std::uint64_t kDefaultMaxFileSize = 4ull << 30;

struct Profile {
  std::string name;
  std::uint64_t max_file_size = kDefaultMaxFileSize;
  std::vector<std::string> volatile_globs;
  std::vector<std::string> size_only_globs;
  std::vector<ValidatorRule> validators;

  // rel: path relative to the backing root, "" for the root itself.
  // Volatile when the path or any of its ancestors matches a volatile glob.
  bool is_volatile(std::string_view rel) const;
  bool is_size_only(std::string_view rel) const;
  std::vector<std::string> validators_for(std::string_view rel) const;
};

Result<Profile> builtin_profile(std::string_view name);      // ENOENT for unknown names
Result<Profile> parse_profile(std::string_view json);        // EINVAL with a reason
Result<Profile> load_profile_file(const std::string& path);  // errno of the read, or EINVAL
// "generic", "tilelang", … or a path to a JSON file (anything containing '/' or ending in .json).
Result<Profile> resolve_profile(std::string_view name_or_path);

}  // namespace sealfs
