#include "fs/cli/version.hpp"

#include <fuse_lowlevel.h>
#include <openssl/crypto.h>

#include <string>

#include "sealfs_commit.hpp"

namespace sealfs::cli {

std::string version_number() { return SEALFS_VERSION; }

std::string version_text() {
  const std::string commit = SEALFS_COMMIT;
  std::string text = "sealfs " + version_number() + "\n";
  text += "commit: " + (commit.empty() ? std::string("unknown") : commit) + "\n";
  text += "libfuse: " + std::string(fuse_pkgversion()) + "\n";
#if OPENSSL_VERSION_MAJOR >= 3
  text += "OpenSSL: " + std::string(OpenSSL_version(OPENSSL_VERSION_STRING));  // "3.0.17"
#else
  text += std::string(OpenSSL_version(OPENSSL_VERSION));  // "OpenSSL 1.1.1w  11 Sep 2023"
#endif
  return text;
}

}  // namespace sealfs::cli
