// `sealfs cuda-check FILE…`: the CUDA image check (core/cuda) on files named
// by the user. By default a summary per file (verdict, images counted per
// architecture and kind, the first problem found): a library such as
// libtorch_cuda.so holds thousands of images. --verbose lists every image,
// --format=json prints the same as one JSON array for scripts.
#include <fcntl.h>
#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

#include <cerrno>
#include <cstring>
#include <iomanip>
#include <ios>
#include <map>
#include <new>
#include <ostream>
#include <string>
#include <string_view>
#include <tuple>
#include <utility>
#include <vector>

#include "core/base/unique_fd.hpp"
#include "core/cuda/cuda.hpp"
#include "fs/cli/commands.hpp"

namespace sealfs::cli {
namespace {

const char* kind_name(cuda::ImageKind kind) {
  switch (kind) {
    case cuda::ImageKind::elf:
      return "elf";
    case cuda::ImageKind::ptx:
      return "ptx";
    case cuda::ImageKind::lto:
      return "lto";
  }
  return "elf";
}

// One line of the summary: the images of one architecture and kind.
struct Group {
  std::size_t count = 0;
  std::size_t compressed = 0;
};
// Ordered by kind (cubins, then PTX, then LTO IR), then SM number, then suffix.
using GroupKey = std::tuple<cuda::ImageKind, unsigned, std::string>;

std::map<GroupKey, Group> group_images(const std::vector<cuda::ImageInfo>& images) {
  std::map<GroupKey, Group> groups;
  for (const auto& image : images) {
    auto& group = groups[{image.kind, image.arch, image.arch_suffix}];
    ++group.count;
    if (image.compressed) ++group.compressed;
  }
  return groups;
}

std::string arch_name(const GroupKey& key) {
  cuda::ImageInfo info;
  info.kind = std::get<0>(key);
  info.arch = std::get<1>(key);
  info.arch_suffix = std::get<2>(key);
  return info.arch_name();
}

// What became of one file: checked (sound or broken), or not readable.
struct Outcome {
  std::string file;
  bool readable = true;
  std::string problem;  // the reason it is broken, or why it could not be read
  cuda::FileCheck check;
};

Outcome check_one(const std::string& file, cuda::Mode mode) {
  Outcome outcome;
  outcome.file = file;
  try {
    // A path named on the command line by the user: following symlinks is
    // what they expect here (this never runs on the backing store).
    UniqueFd fd(::open(file.c_str(), O_RDONLY | O_CLOEXEC));
    if (!fd) {
      outcome.readable = false;
      outcome.problem = std::strerror(errno);
      return outcome;
    }
    auto check = cuda::check_file(fd.get(), mode, file);
    if (!check) {
      outcome.readable = false;
      outcome.problem = check.error().message + ": " + std::strerror(check.error().code);
      return outcome;
    }
    outcome.check = std::move(*check);
    if (!outcome.check.sound) outcome.problem = outcome.check.reason;
  } catch (const std::bad_alloc&) {
    outcome.readable = false;
    outcome.problem = "out of memory";
  }
  return outcome;
}

std::string count_text(std::size_t n) {
  if (n == 0) return "no CUDA images";
  return std::to_string(n) + (n == 1 ? " CUDA image" : " CUDA images");
}

void print_text(const Outcome& o, bool verbose, std::ostream& out) {
  const auto& images = o.check.images;
  if (o.check.sound)
    out << o.file << ": sound, " << count_text(images.size()) << " (driver: " << o.check.driver << ")\n";
  else
    out << o.file << ": BROKEN: " << o.problem << " (" << count_text(images.size()) << " before it)\n";
  if (verbose) {
    for (std::size_t i = 0; i < images.size(); ++i)
      out << "  " << std::setw(6) << i + 1 << "  " << std::left << std::setw(12) << images[i].arch_name()
          << std::right << kind_name(images[i].kind) << (images[i].compressed ? "  compressed" : "") << '\n';
    return;
  }
  for (const auto& [key, group] : group_images(images)) {
    out << "  " << std::left << std::setw(12) << arch_name(key) << std::setw(4) << kind_name(std::get<0>(key))
        << std::right << std::setw(7) << group.count;
    if (group.compressed == group.count)
      out << "  compressed";
    else if (group.compressed != 0)
      out << "  (" << group.compressed << " compressed)";
    out << '\n';
  }
}

using JsonWriter = rapidjson::Writer<rapidjson::StringBuffer>;

void write_images_json(const std::vector<cuda::ImageInfo>& images, bool verbose, JsonWriter& w) {
  w.Key("images");
  w.Uint64(images.size());
  w.Key("by_arch");
  w.StartArray();
  for (const auto& [key, group] : group_images(images)) {
    w.StartObject();
    w.Key("arch");
    w.String(arch_name(key).c_str());
    w.Key("kind");
    w.String(kind_name(std::get<0>(key)));
    w.Key("count");
    w.Uint64(group.count);
    w.Key("compressed");
    w.Uint64(group.compressed);
    w.EndObject();
  }
  w.EndArray();
  if (!verbose) return;
  w.Key("image_list");
  w.StartArray();
  for (const auto& image : images) {
    w.StartObject();
    w.Key("arch");
    w.String(image.arch_name().c_str());
    w.Key("kind");
    w.String(kind_name(image.kind));
    w.Key("compressed");
    w.Bool(image.compressed);
    w.EndObject();
  }
  w.EndArray();
}

void write_json(const Outcome& o, bool verbose, JsonWriter& w) {
  w.StartObject();
  w.Key("file");
  w.String(o.file.c_str(), static_cast<rapidjson::SizeType>(o.file.size()));
  w.Key("verdict");
  w.String(!o.readable ? "error" : o.check.sound ? "sound" : "broken");
  w.Key("problem");
  if (o.problem.empty())
    w.Null();
  else
    w.String(o.problem.c_str(), static_cast<rapidjson::SizeType>(o.problem.size()));
  if (o.readable) {
    w.Key("driver");
    w.String(o.check.driver.c_str());
    write_images_json(o.check.images, verbose, w);
  }
  w.EndObject();
}

}  // namespace

int run_cuda_check(const std::vector<std::string>& files, std::string_view mode, std::ostream& out,
                   std::ostream& err, const CudaCheckReport& report) {
  constexpr int kSound = 0, kBroken = 1, kUsage = 2;
  const auto parsed = cuda::parse_mode(mode.empty() ? "structural" : mode);
  if (!parsed) {
    err << "sealfs cuda-check: " << parsed.error().message << '\n';
    return kUsage;
  }
  if (report.format != "text" && report.format != "json") {
    err << "sealfs cuda-check: --format must be text or json, not '" << report.format << "'\n";
    return kUsage;
  }
  if (files.empty()) {
    err << "sealfs cuda-check: no files given\n";
    return kUsage;
  }
  const bool json = report.format == "json";
  rapidjson::StringBuffer buffer;
  JsonWriter writer(buffer);
  if (json) writer.StartArray();
  bool any_broken = false, any_usage = false;
  for (const auto& file : files) {
    const Outcome outcome = check_one(file, *parsed);
    if (!outcome.readable) err << file << ": " << outcome.problem << '\n';
    any_usage = any_usage || !outcome.readable;
    any_broken = any_broken || (outcome.readable && !outcome.check.sound);
    if (json)
      write_json(outcome, report.verbose, writer);
    else if (outcome.readable)
      print_text(outcome, report.verbose, out);
  }
  if (json) {
    writer.EndArray();
    out << buffer.GetString() << '\n';
  }
  return any_usage ? kUsage : any_broken ? kBroken : kSound;
}

}  // namespace sealfs::cli
