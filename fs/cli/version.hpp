// `sealfs --version`: what was built and what it runs with.
#pragma once

#include <string>

namespace sealfs::cli {

// Four lines: "sealfs VERSION", "commit: HASH" (or "unknown"; "-modified"
// when tracked files differed from it), and the libfuse and OpenSSL versions
// of the libraries linked in, as they report themselves at run time.
std::string version_text();

// The version alone, as CMake's project() has it ("0.1.0").
std::string version_number();

}  // namespace sealfs::cli
