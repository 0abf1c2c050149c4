// A file's stamp (R8): what identifies one version of a backing file
// without reading it. The verifier's cache, the manifest files and the
// store's READ checks all compare stamps.
#pragma once

#include <sys/stat.h>
#include <sys/types.h>

#include <ctime>

namespace sealfs {

struct Stamp {
  dev_t dev = 0;
  ino_t ino = 0;
  off_t size = 0;
  struct timespec mtime {};
  struct timespec ctime {};
  static Stamp of(const struct stat& st);
  bool operator==(const Stamp& o) const;
  // A ctime under one second before now: a same-size rewrite within the
  // same timestamp tick could follow it unseen, so the stamp does not yet
  // vouch for the content (R8).
  bool too_recent() const;
};

}  // namespace sealfs
