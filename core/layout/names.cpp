#include "core/layout/names.hpp"

#include <cerrno>
#include <climits>
#include <string_view>

#include "core/base/digest.hpp"
#include "core/base/result.hpp"

namespace sealfs {

bool is_reserved_name(std::string_view name) {
  return name.substr(0, kReservedPrefix.size()) == kReservedPrefix;
}

Status check_name(std::string_view name) {
  if (name.empty() || name == "." || name == ".." || name.find('/') != std::string_view::npos ||
      name.find('\0') != std::string_view::npos)
    return make_error(EINVAL, "invalid name");
  if (name.size() > NAME_MAX) return make_error(ENAMETOOLONG, "name too long");
  return {};
}

Status check_new_name(std::string_view name) {
  if (Status s = check_name(name); !s) return s;
  if (is_reserved_name(name)) return make_error(EPERM, "reserved name");
  return {};
}

bool sidecar_is_hashed(std::string_view file_name) {
  return kSidecarPrefix.size() + file_name.size() > NAME_MAX;
}

std::string sidecar_name(std::string_view file_name) {
  std::string out(kSidecarPrefix);
  if (sidecar_is_hashed(file_name)) {
    out += '#';
    out += to_hex(sha256_of(file_name));
  } else {
    out += file_name;
  }
  return out;
}

}  // namespace sealfs
