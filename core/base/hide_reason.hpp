// Why an object is hidden from a lookup or moved to quarantine: a verdict
// word, shared by the verifier that finds it, the store that acts on it and
// the counters that count by it (one Prometheus label value per reason).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string_view>

namespace sealfs {

// A fixed set, in label order. Damage (R2): missing, type, size, digest,
// manifest. Not damage: foreign (R3), unlisted (a file in an entry its
// manifest does not list), reserved (R7, hidden only), abandoned (R4,
// quarantined only), only_hidden (R5: a directory of nothing but hidden
// objects, moved out of a new name's way). Validators never hide or
// quarantine: they run at publish and seal, and refuse (Metrics::rejected).
enum class HideReason : std::uint8_t {
  abandoned,
  digest,    // a SHA-256 (or a symlink target) differs from the manifest
  foreign,   // no manifest covers it
  manifest,  // the manifest does not parse, or breaks its rules
  missing,   // a listed file is not there (or unreadable to the daemon)
  only_hidden,
  reserved,
  size,  // a listed file's size differs (or exceeds max_file_size)
  type,  // a listed path is of another type (a directory, a FIFO, a symlink…)
  unlisted,
};

// The label values, one per reason in enum order. The count follows from
// them rather than being kept by hand; the assert ties the last reason to
// the last label.
inline constexpr auto kHideReasonLabels = std::to_array<std::string_view>({
    "abandoned",
    "digest",
    "foreign",
    "manifest",
    "missing",
    "only_hidden",
    "reserved",
    "size",
    "type",
    "unlisted",
});
inline constexpr std::size_t kHideReasons = kHideReasonLabels.size();
static_assert(static_cast<std::size_t>(HideReason::unlisted) + 1 == kHideReasons &&
                  kHideReasonLabels[kHideReasons - 1] == "unlisted",
              "one label value per HideReason, in enum order");

// The label value: "abandoned", "digest", …
constexpr std::string_view label_of(HideReason reason) {
  return kHideReasonLabels[static_cast<std::size_t>(reason)];
}

// The reason named by a label value, or false (a newer daemon's reason).
constexpr bool reason_from_label(std::string_view label, HideReason& reason) {
  for (std::size_t i = 0; i < kHideReasons; ++i) {
    if (kHideReasonLabels[i] == label) {
      reason = static_cast<HideReason>(i);
      return true;
    }
  }
  return false;
}

}  // namespace sealfs
