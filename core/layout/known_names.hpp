// R4: a file is an inode, not a name. The names through which the daemon saw
// an object with more than one link (looked up, listed, created, linked or
// renamed through the mount), keyed by the object (device, inode number),
// each name as (the directory's identity, the name in it). It follows
// renames and unlinks made through the mount, and forgets an object when
// the kernel does.
//
// Why: the store finds a file's place from the path /proc gives for the one
// descriptor the daemon holds, which is the name it was opened by. Once that
// name is unlinked, /proc says "(deleted)" although the file may have other
// names in other directories (`ln a/f b/g; ln a/f h; rm h`); this registry
// knows them. Files with one link need none of it (/proc follows renames),
// so they cost nothing here until a second link is seen.
//
// Facts only: a name here may be stale (changed behind the mount), so a user
// checks each one (fstatat: the same object) before trusting it. Bounded:
// at most names_per_object names an object (the oldest go first) and
// max_objects objects (beyond that new objects are not recorded: the store
// then falls back to what /proc and the caller's hint say).
#pragma once

#include <sys/stat.h>
#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace sealfs {

// An object's identity on the host: what a name resolves to.
struct ObjectId {
  dev_t dev = 0;
  ino_t ino = 0;
  static ObjectId of(const struct stat& st) { return ObjectId{st.st_dev, st.st_ino}; }
  friend bool operator==(const ObjectId&, const ObjectId&) = default;
  friend bool operator<(const ObjectId& a, const ObjectId& b) {
    return a.dev != b.dev ? a.dev < b.dev : a.ino < b.ino;
  }
};

class KnownNames {
 public:
  struct Name {
    ObjectId dir;
    std::string name;
    friend bool operator==(const Name&, const Name&) = default;
  };

  static constexpr std::size_t kNamesPerObject = 16;
  static constexpr std::size_t kMaxObjects = 65536;

  explicit KnownNames(std::size_t names_per_object = kNamesPerObject, std::size_t max_objects = kMaxObjects);

  // obj (a regular file with nlink links) was found as name in dir: recorded
  // when it has more than one link or is already known (its earlier names
  // stay). A name held by another object before passes to obj.
  void seen(ObjectId obj, nlink_t nlink, ObjectId dir, std::string_view name);
  // dir/name no longer exists (unlink through the mount).
  void removed(ObjectId dir, std::string_view name);
  // rename(from_dir/from → to_dir/to) of moved: whatever to named goes, and
  // moved, if known, is named to (not from). exchanged: the object that was
  // at to_dir/to when the two were swapped (RENAME_EXCHANGE): it is at
  // from_dir/from now.
  void renamed(ObjectId moved, ObjectId from_dir, std::string_view from, ObjectId to_dir, std::string_view to,
               std::optional<ObjectId> exchanged = std::nullopt);
  // The kernel forgot obj, or its last link went: every name of it goes.
  void forget(ObjectId obj);

  // obj's names, the most recently seen first.
  std::vector<Name> names_of(ObjectId obj) const;
  std::size_t objects() const;
  std::size_t names() const;
  // Objects not recorded because max_objects was reached.
  std::uint64_t refused() const;

 private:
  using NameKey = std::pair<ObjectId, std::string>;
  // Under mu_: drops dir/name wherever it is recorded.
  void drop_locked(const NameKey& key);
  // Under mu_: records dir/name for obj, first in its list.
  void add_locked(ObjectId obj, ObjectId dir, std::string_view name);

  const std::size_t names_per_object_;
  const std::size_t max_objects_;
  mutable std::mutex mu_;                            // a leaf: nothing else is locked while it is held
  std::map<ObjectId, std::vector<Name>> by_object_;  // newest first
  std::map<NameKey, ObjectId, std::less<>> by_name_;
  std::uint64_t refused_ = 0;
};

}  // namespace sealfs
