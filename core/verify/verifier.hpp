// The stamp cache of R8: a file is hashed when first needed and again only
// when its stamp changes (or its ctime is too recent to trust). Many threads
// asking for the same file at once cause one hash.
#pragma once

#include <sys/stat.h>

#include <cstdint>
#include <functional>
#include <memory>

#include "core/base/digest.hpp"
#include "core/base/metrics.hpp"
#include "core/base/result.hpp"
#include "core/base/stamp.hpp"

namespace sealfs {

class Verifier {
 public:
  // max_cached bounds memory: about 200 bytes a file (2^17: ~26 MiB).
  explicit Verifier(Metrics& metrics, std::size_t max_cached = 1u << 17);
  // Tests only: called between reading a file and checking that it did not
  // change meanwhile, so a test can change it there (see fs/README.md).
  void set_mid_hash_hook(std::function<void()> hook);
  ~Verifier();

  // SHA-256 of the regular file open (O_RDONLY) as fd. Served from the cache
  // when the stamp is unchanged and its ctime is at least one second older
  // than now; force=true (verify=always) hashes regardless. EINTR when the
  // caller's CancelScope (or shutdown) stops the hash or the wait for one.
  Result<Sha256> digest(int fd, bool force = false);
  void forget(dev_t dev, ino_t ino);
  std::size_t cached() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace sealfs
