// The progress of `sealfs fsck` and `sealfs adopt` for a person watching:
// on a terminal, one line rewritten in place (\r) while the work goes on
// (items done of planned, bytes hashed, MB/s, ETA); at the end, terminal or
// not, exactly one summary line. It writes to stderr, so stdout stays the
// report that scripts read, as it always was.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <ostream>
#include <string>
#include <string_view>

#include "core/store/progress.hpp"

namespace sealfs::cli {

class ProgressLine : public OfflineProgress {
 public:
  using Clock = std::chrono::steady_clock;

  // job: "fsck" or "adopt"; unit: what an item is ("entries"). live: out is
  // a terminal (isatty), so the line may be rewritten in place.
  ProgressLine(std::string_view job, std::string_view unit, std::ostream& out, bool live);

  void planned(const Work& total) override;
  void advanced(const Work& done) override;
  // The summary line (on a terminal it replaces the progress line).
  void finish();

  // The two lines' texts, for a given elapsed time (tests).
  std::string progress_text(const Work& done, double seconds) const;
  std::string summary_text(const Work& done, double seconds) const;

  // At most this often is the line redrawn (the first and last always are).
  static constexpr std::chrono::milliseconds kRedraw{100};

 private:
  void draw(const std::string& text, bool end);

  std::string job_;
  std::string unit_;
  std::ostream& out_;
  bool live_;
  Work total_;
  Work done_;
  Clock::time_point start_;
  Clock::time_point last_draw_{};
  bool drawn_ = false;
  std::size_t width_ = 0;  // of the line on screen, which a shorter one must cover
};

// "123 B", "4.5 kB", "6.7 MB", "8.9 GB" (decimal units, as rates are).
std::string human_bytes(std::uint64_t bytes);
// "0:07", "12:34", "1:02:03".
std::string clock_text(double seconds);

}  // namespace sealfs::cli
