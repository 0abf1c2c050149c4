// Shared test helpers: a temporary directory removed at scope exit, and small
// file utilities. Used by unit, integration and scenario tests alike.
#pragma once

#include <sys/types.h>

#include <optional>
#include <string>
#include <string_view>

namespace sealfs::test {

class TempDir {
 public:
  // Created under $TMPDIR (or /tmp) as <prefix>.XXXXXX.
  explicit TempDir(std::string_view prefix = "sealfs-test");
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  const std::string& path() const { return path_; }
  std::string operator/(std::string_view rel) const { return path_ + "/" + std::string(rel); }

 private:
  std::string path_;
};

// Remove a tree (no symlink following); true when it is gone.
bool remove_tree(const std::string& path);
// Write data to path (created or truncated), creating no directories.
void write_file(const std::string& path, std::string_view data, mode_t mode = 0644);
// Whole content of a file, or nullopt when it cannot be read.
std::optional<std::string> read_file(const std::string& path);
bool exists_nofollow(const std::string& path);
// mkdir -p
void make_dirs(const std::string& path, mode_t mode = 0755);

}  // namespace sealfs::test
