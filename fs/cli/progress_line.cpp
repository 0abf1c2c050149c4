#include "fs/cli/progress_line.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <ostream>
#include <string>
#include <string_view>

#include "core/store/progress.hpp"

namespace sealfs::cli {
namespace {

std::string one_decimal(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f", v);
  return buf;
}

std::string megabytes_per_second(std::uint64_t bytes, double seconds) {
  return one_decimal(seconds > 0 ? static_cast<double>(bytes) / 1e6 / seconds : 0.0) + " MB/s";
}

}  // namespace

std::string human_bytes(std::uint64_t bytes) {
  const auto b = static_cast<double>(bytes);
  if (bytes < 1000) return std::to_string(bytes) + " B";
  if (b < 1e6) return one_decimal(b / 1e3) + " kB";
  if (b < 1e9) return one_decimal(b / 1e6) + " MB";
  return one_decimal(b / 1e9) + " GB";
}

std::string clock_text(double seconds) {
  const auto total = static_cast<long long>(std::llround(std::max(seconds, 0.0)));
  const long long h = total / 3600;
  const long long m = total / 60 % 60;
  const long long s = total % 60;
  char buf[48];
  if (h > 0)
    std::snprintf(buf, sizeof buf, "%lld:%02lld:%02lld", h, m, s);
  else
    std::snprintf(buf, sizeof buf, "%lld:%02lld", m, s);
  return buf;
}

ProgressLine::ProgressLine(std::string_view job, std::string_view unit, std::ostream& out, bool live)
    : job_(job), unit_(unit), out_(out), live_(live), start_(Clock::now()) {}

void ProgressLine::planned(const Work& total) { total_ = total; }

void ProgressLine::advanced(const Work& done) {
  done_ = done;
  if (!live_) return;
  const auto now = Clock::now();
  if (drawn_ && now - last_draw_ < kRedraw) return;
  last_draw_ = now;
  draw(progress_text(done_, std::chrono::duration<double>(now - start_).count()), false);
}

void ProgressLine::finish() {
  draw(summary_text(done_, std::chrono::duration<double>(Clock::now() - start_).count()), true);
}

std::string ProgressLine::progress_text(const Work& done, double seconds) const {
  std::string line = job_ + ": " + std::to_string(done.items) + "/" + std::to_string(total_.items) + " " +
                     unit_ + ", " + human_bytes(done.bytes) + "/" + human_bytes(total_.bytes) + " hashed, " +
                     megabytes_per_second(done.bytes, seconds);
  // The ETA follows the bytes where there are any to hash (hashing is the
  // cost), else the items.
  double left = -1;
  if (total_.bytes > 0 && done.bytes > 0) {
    left = seconds * static_cast<double>(total_.bytes > done.bytes ? total_.bytes - done.bytes : 0) /
           static_cast<double>(done.bytes);
  } else if (total_.bytes == 0 && done.items > 0) {
    left = seconds * static_cast<double>(total_.items > done.items ? total_.items - done.items : 0) /
           static_cast<double>(done.items);
  }
  return line + ", ETA " + (left < 0 ? std::string("?") : clock_text(left));
}

std::string ProgressLine::summary_text(const Work& done, double seconds) const {
  return job_ + ": " + std::to_string(done.items) + " " + unit_ + ", " + human_bytes(done.bytes) +
         " hashed in " + one_decimal(seconds) + " s (" + megabytes_per_second(done.bytes, seconds) + ")";
}

void ProgressLine::draw(const std::string& text, bool end) {
  if (live_) {
    std::string line = "\r" + text;
    if (text.size() < width_) line.append(width_ - text.size(), ' ');  // cover a longer line before
    width_ = std::max(width_, text.size());
    out_ << line;
  } else {
    out_ << text;
  }
  if (end) out_ << '\n';
  out_.flush();
  drawn_ = true;
}

}  // namespace sealfs::cli
