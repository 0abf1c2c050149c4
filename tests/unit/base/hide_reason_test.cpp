#include "core/base/hide_reason.hpp"

#include <gtest/gtest.h>

#include <cstddef>

namespace sealfs {
namespace {

// Every reason has a label that names it back, in label order (the order
// Prometheus and the status JSON list them in).
TEST(HideReason, LabelsRoundTripInOrder) {
  for (std::size_t i = 0; i < kHideReasons; ++i) {
    const auto r = static_cast<HideReason>(i);
    HideReason back{};
    ASSERT_TRUE(reason_from_label(label_of(r), back)) << label_of(r);
    EXPECT_EQ(back, r);
    if (i > 0) {
      EXPECT_LT(label_of(static_cast<HideReason>(i - 1)), label_of(r));
    }
  }
}

// A label this daemon does not know (a newer daemon's reason, or none) is
// not taken for one it knows.
TEST(HideReason, AnUnknownLabelNamesNoReason) {
  HideReason r = HideReason::digest;
  EXPECT_FALSE(reason_from_label("validator", r));
  EXPECT_FALSE(reason_from_label("", r));
  EXPECT_FALSE(reason_from_label("Digest", r));
  EXPECT_EQ(r, HideReason::digest);
}

// The labels work at compile time, where the metrics tables are built.
static_assert(label_of(HideReason::only_hidden) == "only_hidden");

}  // namespace
}  // namespace sealfs
