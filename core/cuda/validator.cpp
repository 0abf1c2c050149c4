// The "cuda" content validator and its manifest record (see cuda.hpp).
#include "core/verify/validator.hpp"

#include <algorithm>
#include <cerrno>
#include <cstddef>
#include <new>
#include <string_view>
#include <utility>
#include <vector>

#include "core/base/result.hpp"
#include "core/cuda/cuda.hpp"
#include "core/cuda/driver.hpp"
#include "core/cuda/file_bytes.hpp"

namespace sealfs::cuda {
namespace {

constexpr std::string_view kDriverLoaded = "loaded";
constexpr std::string_view kDriverNotOnThisDevice = "not-validated-on-this-device";
constexpr std::string_view kDriverNotRun = "not-run";

std::string_view kind_name(ImageKind kind) {
  switch (kind) {
    case ImageKind::elf:
      return "elf";
    case ImageKind::ptx:
      return "ptx";
    case ImageKind::lto:
      return "lto";
  }
  return "elf";
}

// *.cubin, *.fatbin and *.ptx exist only to hold device code.
bool names_a_device_image(std::string_view name) {
  for (std::string_view ext : {".cubin", ".fatbin", ".ptx"})
    if (name.size() > ext.size() && name.substr(name.size() - ext.size()) == ext) return true;
  return false;
}

// Run every loadable through the driver; fills check.driver, or marks damage.
void check_with_driver(const Scan& scan, FileCheck& check) {
  if (scan.loadables.empty()) return;
  detail::Driver& driver = detail::Driver::instance();
  if (!driver.available()) return;  // said once on stderr by the driver
  bool all_loaded = true;
  for (const auto& image : scan.loadables) {
    const detail::DriverLoad load = driver.load(image);
    if (load.verdict == detail::DriverVerdict::invalid) {
      check.sound = false;
      check.reason = image.where + ": the CUDA driver refuses it: " + load.message;
      return;
    }
    all_loaded = all_loaded && load.verdict == detail::DriverVerdict::loaded;
  }
  check.driver = all_loaded ? kDriverLoaded : kDriverNotOnThisDevice;
}

}  // namespace

Result<Mode> parse_mode(std::string_view mode) {
  if (mode == "off") return Mode::off;
  if (mode == "structural") return Mode::structural;
  if (mode == "driver") return Mode::driver;
  return make_error(EINVAL,
                    "cuda_validate must be off, structural or driver, not '" + std::string(mode) + "'");
}

std::string record_json(const std::vector<ImageInfo>& images, std::string_view driver) {
  // Canonical: keys sorted, images sorted by (kind, arch) and without
  // duplicates, so equal content gives equal bytes. Names are [a-z0-9_-] only.
  std::vector<std::pair<std::string_view, std::string>> rows;
  rows.reserve(images.size());
  for (const auto& image : images) rows.emplace_back(kind_name(image.kind), image.arch_name());
  std::sort(rows.begin(), rows.end());
  rows.erase(std::unique(rows.begin(), rows.end()), rows.end());
  std::string json = R"({"driver":")" + std::string(driver) + R"(","images":[)";
  for (std::size_t i = 0; i < rows.size(); ++i) {
    if (i != 0) json += ',';
    json += R"({"arch":")" + rows[i].second + R"(","kind":")" + std::string(rows[i].first) + R"("})";
  }
  json += "]}";
  return json;
}

Result<FileCheck> check_file(int fd, Mode mode, std::string_view name) {
  FileCheck check;
  check.driver = std::string(kDriverNotRun);  // until the driver says more
  if (mode == Mode::off) return check;
  auto content = detail::FileBytes::load(fd);
  if (!content) return content.error();
  auto scan = scan_images(content->bytes());
  if (!scan) {
    check.sound = false;
    check.reason = scan.error().message;
    return check;
  }
  if (scan->images.empty() && names_a_device_image(name)) {
    check.sound = false;
    check.reason = "no CUDA image in a file named as one";
    return check;
  }
  check.images = scan->images;
  if (mode == Mode::driver) check_with_driver(*scan, check);
  return check;
}

ValidatorFn make_validator(std::string_view mode) {
  const Mode parsed = parse_mode(mode).ok() ? *parse_mode(mode) : Mode::structural;
  return [parsed](int fd, std::string_view rel) -> ValidationOutcome {
    ValidationOutcome outcome;
    if (parsed == Mode::off) return outcome;
    try {
      auto check = check_file(fd, parsed, rel);
      if (!check) {
        // Unreadable now means unverifiable: refusing keeps damage out.
        outcome.accepted = false;
        outcome.reason = std::string(rel) + ": cannot read for CUDA validation: " + check.error().message;
      } else if (!check->sound) {
        outcome.accepted = false;
        outcome.reason = std::string(rel) + ": broken CUDA image: " + check->reason;
      } else if (!check->images.empty()) {
        outcome.record_json = record_json(check->images, check->driver);
      }
    } catch (const std::bad_alloc&) {  // the only thing that can throw here
      outcome.accepted = false;
      outcome.reason = std::string(rel) + ": out of memory during CUDA validation";
    }
    return outcome;
  };
}

}  // namespace sealfs::cuda
