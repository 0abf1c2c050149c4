// Fatbin container validation (layout in fatbin.hpp).
#include "core/cuda/fatbin.hpp"

#include <cerrno>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>

#include "core/base/result.hpp"
#include "core/cuda/byte_reader.hpp"
#include "core/cuda/elf_reader.hpp"
#include "core/cuda/ptx_text.hpp"

namespace sealfs::cuda::detail {
namespace {

// Offsets inside an entry header.
constexpr std::uint64_t kEntryKind = 0;
constexpr std::uint64_t kEntryHeaderSize = 4;
constexpr std::uint64_t kEntryPayloadSize = 8;
constexpr std::uint64_t kEntryCompressedSize = 16;
constexpr std::uint64_t kEntryArch = 28;
constexpr std::uint64_t kEntryFlags = 40;
constexpr std::uint64_t kEntryUncompressedSize = 56;

// SM numbers nvcc has ever targeted lie in 10..(well under) 1000.
constexpr std::uint32_t kMinArch = 10;
constexpr std::uint32_t kMaxArch = 999;

Error damaged(std::uint64_t at, std::string what) {
  return make_error(EBADMSG, "fatbin: " + std::move(what) + " (entry at +" + std::to_string(at) + ")");
}

Status check_payload(const FatbinEntry& entry, Bytes payload, std::uint64_t at) {
  if (entry.compressed()) return {};  // checked by sizes only: no decompressor here
  switch (entry.kind) {
    case FatbinKind::elf: {
      auto elf = parse_elf(payload, ElfDetail::headers);
      if (!elf) return damaged(at, "embedded cubin: " + elf.error().message);
      if (elf->machine != kEmCuda) return damaged(at, "embedded ELF is not a cubin");
      if (cubin_sm(*elf) != entry.arch) return damaged(at, "cubin SM differs from the entry's arch");
      return {};
    }
    case FatbinKind::ptx: {
      auto ptx = check_ptx(std::string_view(reinterpret_cast<const char*>(payload.data()), payload.size()));
      if (!ptx) return damaged(at, "embedded " + ptx.error().message);
      return {};
    }
    case FatbinKind::lto:
      return {};  // NVVM IR: opaque, bounds only
  }
  return damaged(at, "unknown entry kind");
}

Result<FatbinEntry> parse_entry(Bytes container, std::uint64_t at, std::uint64_t end) {
  const Bytes region = container.subspan(0, end);
  const auto kind = read_at<std::uint16_t>(region, at + kEntryKind);
  const auto header_size = read_at<std::uint32_t>(region, at + kEntryHeaderSize);
  const auto payload_size = read_at<std::uint64_t>(region, at + kEntryPayloadSize);
  if (!kind || !header_size || !payload_size) return damaged(at, "truncated entry header");
  if (*header_size < kFatbinEntryMinHeader || *header_size > kFatbinEntryMaxHeader || *header_size % 8 != 0)
    return damaged(at, "bad entry header size " + std::to_string(*header_size));
  if (!in_bounds(end, at, *header_size)) return damaged(at, "entry header past the container's end");
  if (*kind != static_cast<std::uint16_t>(FatbinKind::ptx) &&
      *kind != static_cast<std::uint16_t>(FatbinKind::elf) &&
      *kind != static_cast<std::uint16_t>(FatbinKind::lto))
    return damaged(at, "unknown entry kind " + std::to_string(*kind));

  FatbinEntry entry;
  entry.kind = static_cast<FatbinKind>(*kind);
  entry.arch = *read_at<std::uint32_t>(region, at + kEntryArch);
  entry.flags = *read_at<std::uint64_t>(region, at + kEntryFlags);
  entry.payload_offset = at + *header_size;
  entry.payload_size = *payload_size;
  if (entry.arch < kMinArch || entry.arch > kMaxArch)
    return damaged(at, "implausible arch " + std::to_string(entry.arch));
  if (entry.payload_size == 0) return damaged(at, "empty payload");
  if (!in_bounds(end, entry.payload_offset, entry.payload_size))
    return damaged(at, "payload past the container's end (size overstated or truncated)");

  if (entry.compressed()) {
    const std::uint64_t compressed = *read_at<std::uint32_t>(region, at + kEntryCompressedSize);
    const std::uint64_t uncompressed = *read_at<std::uint64_t>(region, at + kEntryUncompressedSize);
    if (compressed == 0 || compressed > entry.payload_size)
      return damaged(at, "compressed size outside the payload");
    if (uncompressed == 0 || uncompressed > kMaxUncompressedEntry ||
        uncompressed > compressed * kMaxCompressionRatio)
      return damaged(at, "implausible uncompressed size " + std::to_string(uncompressed));
  }
  if (auto ok = check_payload(entry, region.subspan(entry.payload_offset, entry.payload_size), at); !ok)
    return ok.error();
  return entry;
}

}  // namespace

bool looks_like_fatbin(Bytes bytes) {
  const auto magic = read_at<std::uint32_t>(bytes, 0);
  const auto version = read_at<std::uint16_t>(bytes, 4);
  const auto header_size = read_at<std::uint16_t>(bytes, 6);
  return magic && *magic == kFatbinMagic && version && *version == kFatbinVersion && header_size &&
         *header_size == kFatbinHeaderSize;
}

Result<Fatbin> parse_fatbin(Bytes bytes) {
  const auto magic = read_at<std::uint32_t>(bytes, 0);
  const auto version = read_at<std::uint16_t>(bytes, 4);
  const auto header_size = read_at<std::uint16_t>(bytes, 6);
  const auto fat_size = read_at<std::uint64_t>(bytes, 8);
  if (!magic || !version || !header_size || !fat_size) return make_error(EBADMSG, "fatbin: truncated header");
  if (*magic != kFatbinMagic) return make_error(EBADMSG, "fatbin: bad magic");
  if (*version != kFatbinVersion)
    return make_error(EBADMSG, "fatbin: unknown version " + std::to_string(*version));
  if (*header_size != kFatbinHeaderSize)
    return make_error(EBADMSG, "fatbin: bad header size " + std::to_string(*header_size));
  if (*fat_size == 0) return make_error(EBADMSG, "fatbin: no entries");
  if (!in_bounds(bytes.size(), *header_size, *fat_size))
    return make_error(EBADMSG, "fatbin: container past the end of its data (size overstated or truncated)");

  Fatbin fatbin;
  fatbin.total_size = *header_size + *fat_size;
  // Entries tile the container exactly: each ends where the next begins.
  for (std::uint64_t at = *header_size; at < fatbin.total_size;) {
    auto entry = parse_entry(bytes, at, fatbin.total_size);
    if (!entry) return entry.error();
    at = entry->payload_offset + entry->payload_size;
    fatbin.entries.push_back(*entry);
  }
  return fatbin;
}

}  // namespace sealfs::cuda::detail
