// The keys that sign and verify manifests (-o key_file=PATH), and the key
// file they come from.
//
// Key file: UTF-8 text, one key per line, `<key-id> <64 hex digits>` (the
// 32-byte secret; upper or lower case), separated by spaces or tabs. Blank
// lines and lines starting with '#' are ignored. A key id is 1 to 64 of
// [A-Za-z0-9._-]. The first key signs every manifest the daemon writes;
// every key listed verifies (rotation: put the new key first, keep the old
// one below it until every entry it signed has been re-signed or replaced).
// The file must be a regular file owned by the user that reads it, with no
// access for group or others (mode & 077 == 0).
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "core/base/hmac.hpp"
#include "core/base/result.hpp"

namespace sealfs {

inline constexpr std::size_t kMaxKeyIdLength = 64;
inline constexpr std::size_t kMaxKeyFileBytes = 64u << 10;

struct ManifestKey {
  std::string id;
  HmacKey secret{};
  ~ManifestKey() { wipe(secret); }  // every copy wipes its secret when it goes
};

class KeyRing {
 public:
  // At least one key, ids unique (parse_key_file checks both).
  explicit KeyRing(std::vector<ManifestKey> keys);
  KeyRing(const KeyRing&) = delete;
  KeyRing& operator=(const KeyRing&) = delete;

  const ManifestKey& signer() const { return keys_.front(); }
  // The key with that id, or null.
  const ManifestKey* find(std::string_view id) const;
  const std::vector<ManifestKey>& keys() const { return keys_; }

 private:
  std::vector<ManifestKey> keys_;
};

bool is_valid_key_id(std::string_view id);

// The keys a key file's text lists (EINVAL with "line N: …" on any defect;
// an empty list is an error too). where: named in the messages.
Result<std::vector<ManifestKey>> parse_key_file(std::string_view text, std::string_view where);
// Reads and checks the key file at path for the effective user: a regular
// file (no symlink followed), owned by geteuid(), mode & 077 == 0, at most
// kMaxKeyFileBytes. Every error is one line naming the path.
Result<std::vector<ManifestKey>> load_key_file(const std::string& path);

}  // namespace sealfs
