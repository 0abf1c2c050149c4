// Discovery of CUDA device images in a file's bytes (scan_images in
// cuda.hpp): standalone cubin, fatbin or PTX; in a host ELF, the fatbins of
// .nv_fatbin and fatbin/cubin blobs embedded in data sections, found by magic
// (TVM-based compilers such as TileLang keep device code in a data blob).
#include <elf.h>

#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <span>
#include <string>
#include <string_view>
#include <utility>

#include "core/base/result.hpp"
#include "core/cuda/byte_reader.hpp"
#include "core/cuda/cuda.hpp"
#include "core/cuda/elf_reader.hpp"
#include "core/cuda/fatbin.hpp"
#include "core/cuda/magic_scan.hpp"
#include "core/cuda/ptx_text.hpp"

namespace sealfs::cuda {

using detail::Bytes;

std::string ImageInfo::arch_name() const {
  const char* prefix = kind == ImageKind::elf ? "sm_" : kind == ImageKind::ptx ? "compute_" : "lto_";
  return prefix + std::to_string(arch) + arch_suffix;
}

namespace {

using detail::kElfMagicBytes;
using detail::kFatbinMagicBytes;
constexpr std::string_view kNvFatbinSection = ".nv_fatbin";

std::string hex_offset(std::uint64_t offset) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "0x%llx", static_cast<unsigned long long>(offset));
  return buf;
}

class Scanner {
 public:
  explicit Scanner(Bytes file) : file_(file) {}

  Result<Scan> run() {
    if (file_.empty()) return make_error(EBADMSG, "empty file");
    if (detail::has_elf_magic(file_)) {
      if (auto st = scan_elf(); !st) return st.error();
    } else if (file_.size() >= sizeof(kFatbinMagicBytes) &&
               std::memcmp(file_.data(), kFatbinMagicBytes, sizeof(kFatbinMagicBytes)) == 0) {
      if (auto st = walk_fatbins(file_, 0, "file"); !st) return st.error();
    } else if (detail::looks_like_ptx(file_)) {
      if (auto st = add_ptx(); !st) return st.error();
    } else if (is_cut_magic()) {
      return make_error(EBADMSG, "truncated inside the file's magic number");
    }
    return std::move(out_);
  }

 private:
  // A file shorter than 4 bytes that begins like an ELF or fatbin magic.
  bool is_cut_magic() const {
    if (file_.size() >= 4) return false;
    return std::memcmp(file_.data(), kElfMagicBytes, file_.size()) == 0 ||
           std::memcmp(file_.data(), kFatbinMagicBytes, file_.size()) == 0;
  }

  Status scan_elf() {
    auto elf = detail::parse_elf(file_);
    if (!elf) {
      if (elf.code() == ENOTSUP) return {};  // big-endian: not a CUDA target, nothing to find
      return elf.error();
    }
    if (elf->machine == detail::kEmCuda) {
      add_cubin_image(*elf);
      out_.loadables.push_back(Loadable{Loadable::Form::cubin, file_.first(elf->extent), "cubin"});
      return {};
    }
    if (elf->sections.empty()) return scan_data(file_, 1, "file");  // no section table: look everywhere
    for (const auto& sec : elf->sections) {
      if (sec.type == SHT_NOBITS || sec.type == SHT_NULL || sec.size == 0) continue;
      const Bytes bytes = file_.subspan(sec.offset, sec.size);  // bounds checked by parse_elf
      if (sec.name == kNvFatbinSection) {
        if (auto st = walk_fatbins(bytes, sec.offset, "section " + sec.name); !st) return st;
      } else if (sec.type == SHT_PROGBITS && (sec.flags & SHF_ALLOC) != 0 &&
                 (sec.flags & SHF_EXECINSTR) == 0) {
        if (auto st = scan_data(bytes, 0, "section " + sec.name); !st) return st;
      }
    }
    return {};
  }

  // .nv_fatbin (or a standalone fatbin file): fatbins back to back, possibly
  // separated by zero padding; anything else there is damage.
  Status walk_fatbins(Bytes region, std::uint64_t base, const std::string& where) {
    std::uint64_t pos = 0;
    while (true) {
      while (pos < region.size() && region[pos] == std::byte{0}) ++pos;
      if (pos >= region.size()) return {};
      const Bytes rest = region.subspan(pos);
      // Held to the format from the magic on: a damaged header is damage.
      if (rest.size() < sizeof(kFatbinMagicBytes) ||
          std::memcmp(rest.data(), kFatbinMagicBytes, sizeof(kFatbinMagicBytes)) != 0)
        return make_error(EBADMSG, where + ": no fatbin header at " + hex_offset(base + pos));
      auto size = add_fatbin(rest, base + pos, where);
      if (!size) return size.error();
      pos += *size;
    }
  }

  // A data section: fatbins and cubins found by their magic numbers.
  Status scan_data(Bytes region, std::uint64_t from, const std::string& where) {
    const auto base = static_cast<std::uint64_t>(region.data() - file_.data());
    std::uint64_t pos = from;
    while (pos < region.size()) {
      const std::uint64_t hit = detail::find_next_magic(region, pos);
      if (hit >= region.size()) return {};
      const Bytes rest = region.subspan(hit);
      std::uint64_t consumed = 1;  // a chance match: move on by one byte
      if (detail::looks_like_fatbin(rest)) {
        auto size = add_fatbin(rest, base + hit, where);
        if (!size) return size.error();
        consumed = *size;
      } else if (detail::looks_like_cubin(rest)) {
        auto elf = detail::parse_elf(rest, detail::ElfDetail::headers);
        if (!elf)
          return make_error(EBADMSG,
                            where + ": cubin at " + hex_offset(base + hit) + ": " + elf.error().message);
        add_cubin_image(*elf);
        out_.loadables.push_back(Loadable{Loadable::Form::cubin, rest.first(elf->extent),
                                          where + " cubin at " + hex_offset(base + hit)});
        consumed = elf->extent;
      }
      pos = hit + consumed;
    }
    return {};
  }

  // Returns the container's size.
  Result<std::uint64_t> add_fatbin(Bytes rest, std::uint64_t offset, const std::string& where) {
    auto fatbin = detail::parse_fatbin(rest);
    if (!fatbin)
      return make_error(EBADMSG, where + ": fatbin at " + hex_offset(offset) + ": " + fatbin.error().message);
    for (const auto& entry : fatbin->entries) {
      ImageInfo image;
      image.kind = entry.kind == detail::FatbinKind::elf   ? ImageKind::elf
                   : entry.kind == detail::FatbinKind::ptx ? ImageKind::ptx
                                                           : ImageKind::lto;
      image.arch = entry.arch;
      if ((entry.flags & detail::kFatbinFlagArchSpecific) != 0)
        image.arch_suffix = "a";
      else if ((entry.flags & detail::kFatbinFlagFamily) != 0)
        image.arch_suffix = "f";
      image.compressed = entry.compressed();
      out_.images.push_back(std::move(image));
    }
    out_.loadables.push_back(Loadable{Loadable::Form::fatbin, rest.first(fatbin->total_size),
                                      where + " fatbin at " + hex_offset(offset)});
    return fatbin->total_size;
  }

  void add_cubin_image(const detail::ElfInfo& elf) {
    out_.images.push_back(ImageInfo{ImageKind::elf, detail::cubin_sm(elf), "", false});
  }

  Status add_ptx() {
    auto ptx = detail::check_ptx(std::string_view(reinterpret_cast<const char*>(file_.data()), file_.size()));
    if (!ptx) return ptx.error();
    out_.images.push_back(ImageInfo{ImageKind::ptx, ptx->sm, ptx->suffix, false});
    out_.loadables.push_back(Loadable{Loadable::Form::ptx, file_, "PTX"});
    return {};
  }

  Bytes file_;
  Scan out_;
};

}  // namespace

Result<Scan> scan_images(std::span<const std::byte> file) { return Scanner(file).run(); }

}  // namespace sealfs::cuda
