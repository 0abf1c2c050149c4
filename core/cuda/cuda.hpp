// CUDA image validation: never publish a kernel library whose device code is
// broken (DESIGN.md R1, the "cuda" validator of the tilelang profile).
//
// Discovery finds device images in a host ELF (.nv_fatbin, and fatbin/cubin
// blobs embedded in data sections, found by magic), or a standalone cubin,
// fatbin or PTX file. Structural validation is CPU only and reads only
// headers. Where a CUDA driver exists (mode "driver"), each image is also
// loaded with cuModuleLoadData through a dlopen'ed libcuda.so.1.
//
// This header is the face of core/cuda (namespace sealfs::cuda); the other
// headers here are its parts (sealfs::cuda::detail), which only core/cuda
// and its tests, fuzzers and benches include.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/base/result.hpp"
#include "core/verify/validator.hpp"

namespace sealfs::cuda {

enum class Mode { off, structural, driver };

// "off" | "structural" | "driver"; EINVAL otherwise.
Result<Mode> parse_mode(std::string_view mode);

enum class ImageKind { elf, ptx, lto };  // lto: NVVM IR for link-time optimisation

// One device image as the manifest records it: a cubin for sm_NN, PTX for
// compute_NN, or LTO IR for lto_NN.
struct ImageInfo {
  ImageKind kind = ImageKind::elf;
  unsigned arch = 0;              // SM number, e.g. 90 for sm_90 / compute_90
  std::string arch_suffix;        // "a" for sm_90a, "f" for sm_100f, else ""
  bool compressed = false;        // a compressed fatbin entry
  std::string arch_name() const;  // "sm_90", "sm_90a", "compute_80", "lto_90"
  bool operator==(const ImageInfo&) const = default;
};

// A blob the driver can load as one module: a whole fatbin, a cubin, or
// NUL-terminated PTX text. Views into the scanned bytes.
struct Loadable {
  enum class Form { fatbin, cubin, ptx } form = Form::fatbin;
  std::span<const std::byte> bytes;
  std::string where;  // "section .nv_fatbin at 0x1234", for messages
};

struct Scan {
  std::vector<ImageInfo> images;    // in file order
  std::vector<Loadable> loadables;  // what the driver check loads
};

// Structural scan of a whole file's bytes. EBADMSG with a reason on any
// structural damage (truncation, headers or sizes out of bounds). A file with
// no CUDA content (a plain host library) scans fine with no images.
Result<Scan> scan_images(std::span<const std::byte> file);

// Canonical JSON for the manifest: sorted keys, no spaces, e.g.
// {"driver":"loaded","images":[{"arch":"sm_90","kind":"elf"},{"arch":"compute_80","kind":"ptx"}]}
// driver: "loaded" | "not-validated-on-this-device" | "not-run".
std::string record_json(const std::vector<ImageInfo>& images, std::string_view driver);

// The verdict on one file.
struct FileCheck {
  bool sound = true;
  std::string reason;              // why it is not sound
  std::vector<ImageInfo> images;   // in file order
  std::string driver = "not-run";  // "loaded" | "not-validated-on-this-device" | "not-run"
};

// Check the regular file open for reading behind fd at the given mode.
// name (its path or last component) matters for one thing: a file named
// *.cubin, *.fatbin or *.ptx must hold a CUDA image, while any other file
// (a *.so) without one is sound. Damage is a value (sound == false); an error
// means the file could not be read at all (errno of the failing call).
Result<FileCheck> check_file(int fd, Mode mode, std::string_view name = {});

// The "cuda" validator at the given mode (anything unknown acts as
// "structural"; parse the mount option with parse_mode first).
ValidatorFn make_validator(std::string_view mode);

}  // namespace sealfs::cuda
