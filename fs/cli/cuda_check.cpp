// `sealfs cuda-check FILE…`: the CUDA image check (core/cuda) on files named
// by the user.
#include <fcntl.h>

#include <cerrno>
#include <cstring>
#include <new>

#include "core/base/unique_fd.hpp"
#include "core/cuda/cuda.hpp"
#include "fs/cli/commands.hpp"

namespace sealfs::cli {
namespace {

std::string describe_images(const std::vector<cuda::ImageInfo>& images) {
  if (images.empty()) return "no CUDA images";
  std::string text;
  for (const auto& image : images) {
    if (!text.empty()) text += ' ';
    text += image.arch_name();
    if (image.compressed) text += "(compressed)";
  }
  return text;
}

}  // namespace

int run_cuda_check(const std::vector<std::string>& files, std::string_view mode, std::ostream& out,
                   std::ostream& err) {
  constexpr int kSound = 0, kBroken = 1, kUsage = 2;
  const auto parsed = cuda::parse_mode(mode.empty() ? "structural" : mode);
  if (!parsed) {
    err << "sealfs cuda-check: " << parsed.error().message << '\n';
    return kUsage;
  }
  if (files.empty()) {
    err << "sealfs cuda-check: no files given\n";
    return kUsage;
  }
  bool any_broken = false;
  bool any_usage = false;
  for (const auto& file : files) {
    try {
      // A path named on the command line by the user: following symlinks is
      // what they expect here (this never runs on the backing store).
      UniqueFd fd(::open(file.c_str(), O_RDONLY | O_CLOEXEC));
      if (!fd) {
        err << file << ": " << std::strerror(errno) << '\n';
        any_usage = true;
        continue;
      }
      auto check = cuda::check_file(fd.get(), *parsed, file);
      if (!check) {
        err << file << ": " << check.error().message << ": " << std::strerror(check.error().code) << '\n';
        any_usage = true;
      } else if (!check->sound) {
        out << file << ": BROKEN: " << check->reason << '\n';
        any_broken = true;
      } else {
        out << file << ": sound: " << describe_images(check->images) << " (driver: " << check->driver
            << ")\n";
      }
    } catch (const std::bad_alloc&) {
      err << file << ": out of memory\n";
      any_usage = true;
    }
  }
  return any_usage ? kUsage : any_broken ? kBroken : kSound;
}

}  // namespace sealfs::cli
