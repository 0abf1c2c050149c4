// The counters for scrapers on a real mount: `sealfs status
// --format=prometheus` and -o metrics_file move together as the mount
// publishes, loads and meets damage; the file is rewritten while mounted and
// once more at the unmount; a metrics_file inside the mount is refused.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <sstream>
#include <string>

#include "tests/mount/mount_test_util.hpp"

namespace sealfs::test {
namespace {

// The value of the sample `name` whose labels contain `labels` (a fragment
// such as reason="size"), or -1 when there is none.
double sample(const std::string& text, const std::string& name, const std::string& labels = "") {
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    if (line.empty() || line[0] == '#' || line.rfind(name, 0) != 0) continue;
    const auto rest = line.substr(name.size());
    if (rest.empty() || (rest[0] != '{' && rest[0] != ' ')) continue;  // another family with this prefix
    const auto close = rest.find('}');
    const std::string label_text = rest[0] == '{' ? rest.substr(1, close - 1) : "";
    if (!labels.empty() && label_text.find(labels) == std::string::npos) continue;
    return std::atof(rest.substr(rest.rfind(' ') + 1).c_str());
  }
  return -1;
}

std::string prometheus_status(const Mount& mount) {
  ProcessResult r = run_process({sealfs_binary(), "status", "--format=prometheus", mount.mountpoint()});
  EXPECT_EQ(r.status, 0) << r.err;
  return r.out;
}

// Both views of the counters: the status command's and the file's.
struct Views {
  std::string status;
  std::string file;
};

class MountMetrics : public MountTest {
 protected:
  MountConfig config() const override {
    return MountConfig::with({"profile=tilelang,cache_timeout=0,metrics_interval=0.2,metrics_file=" + file_});
  }

  // Waits until the file shows what pred asks (it is rewritten every 0.2 s).
  std::string file_when(const std::function<bool(const std::string&)>& pred) {
    std::string text;
    eventually([&] {
      text = read_file(file_).value_or("");
      return pred(text);
    });
    return text;
  }

  TempDir prom_{"sealfs-prom"};
  std::string file_ = prom_.path() + "/sealfs.prom";
};

TEST_F(MountMetrics, StatusAndFileCountPublishesHitsAndDamageByReason) {
  const std::string first = file_when([](const std::string& t) { return !t.empty(); });
  ASSERT_FALSE(first.empty()) << "no metrics file after 10 s";
  EXPECT_EQ(sample(first, "sealfs_publishes_total"), 0) << first;
  // The label is the mountpoint as the daemon resolved it, in both views.
  char* real = ::realpath(mount_->mountpoint().c_str(), nullptr);
  ASSERT_NE(real, nullptr);
  const std::string label = std::string("mountpoint=\"") + real + "\"";
  std::free(real);
  EXPECT_NE(first.find(label), std::string::npos) << first;
  EXPECT_NE(prometheus_status(*mount_).find(label), std::string::npos);

  ASSERT_EQ(tilelang("save", mount_->mountpoint(), "k").status, 0);
  ASSERT_EQ(tilelang("load", mount_->mountpoint(), "k").status, kHit);
  ASSERT_EQ(tilelang("load", mount_->mountpoint(), "absent").status, kMiss);
  ASSERT_EQ(::truncate(mount_->b("ns/kernels/k/kernel_lib.so").c_str(), 10), 0);
  ASSERT_EQ(tilelang("load", mount_->mountpoint(), "k").status, kMiss);

  Views v;
  v.status = prometheus_status(*mount_);
  v.file = file_when(
      [](const std::string& t) { return sample(t, "sealfs_quarantined_total", "reason=\"size\"") >= 1; });
  for (const std::string* text : {&v.status, &v.file}) {
    SCOPED_TRACE(text == &v.status ? "sealfs status --format=prometheus" : "metrics_file");
    EXPECT_GE(sample(*text, "sealfs_publishes_total"), 1) << *text;
    EXPECT_GE(sample(*text, "sealfs_hits_total"), 1) << *text;
    EXPECT_GE(sample(*text, "sealfs_misses_total"), 1) << *text;
    EXPECT_GE(sample(*text, "sealfs_hashed_bytes_total"), 1) << *text;
    EXPECT_EQ(sample(*text, "sealfs_quarantined_total", "reason=\"size\""), 1) << *text;
    EXPECT_EQ(sample(*text, "sealfs_quarantined_total", "reason=\"digest\""), 0) << *text;
    EXPECT_GE(sample(*text, "sealfs_hidden_total", "reason=\"size\""), 1) << *text;
    const double count = sample(*text, "sealfs_publish_duration_seconds_count");
    EXPECT_EQ(count, sample(*text, "sealfs_publishes_total")) << *text;
    EXPECT_EQ(sample(*text, "sealfs_publish_duration_seconds_bucket", "le=\"+Inf\""), count) << *text;
    EXPECT_GT(sample(*text, "sealfs_publish_duration_seconds_sum"), 0) << *text;
  }
  // The JSON form, the default, says the same.
  ProcessResult json = run_process({sealfs_binary(), "status", mount_->mountpoint()});
  ASSERT_EQ(json.status, 0) << json.err;
  EXPECT_EQ(json.out.front(), '{');
  EXPECT_NE(json.out.find("\"quarantined_by_reason\":{"), std::string::npos) << json.out;
}

// The writer is a shell of its own: a process that holds a descriptor on the
// mount while it posix_spawn()s `sealfs status` hangs, because the child's
// exec closes that descriptor (a FLUSH) and the daemon's FLUSH reads
// /proc/<tid>/stat of a task in the middle of exec (R4's closer check).
TEST_F(MountMetrics, GaugesShowOpenHandlesAndFilesInProgress) {
  const std::string path = mount_->m("in-progress.bin");
  const pid_t writer = spawn_process({"/bin/sh", "-c", "exec 3>'" + path + "'; printf x >&3; sleep 3"},
                                     prom_.path() + "/writer.log");
  ASSERT_GT(writer, 0);
  std::string held;
  EXPECT_TRUE(eventually([&] {
    held = prometheus_status(*mount_);
    return sample(held, "sealfs_in_progress_files") == 1;
  })) << held;
  EXPECT_GE(sample(held, "sealfs_open_handles"), 1) << held;
  EXPECT_EQ(wait_process(writer, std::chrono::seconds(30)), 0);  // a normal close: sealed
  EXPECT_TRUE(
      eventually([&] { return sample(prometheus_status(*mount_), "sealfs_in_progress_files") == 0; }));
  EXPECT_TRUE(eventually([&] { return sample(prometheus_status(*mount_), "sealfs_seals_total") == 1; }));
}

TEST_F(MountMetrics, TheFileIsWrittenOnceMoreAtTheUnmount) {
  ASSERT_EQ(tilelang("save", mount_->mountpoint(), "k").status, 0);
  const double publishes = sample(prometheus_status(*mount_), "sealfs_publishes_total");
  ASSERT_GE(publishes, 1);
  ASSERT_EQ(mount_->unmount(), 0) << mount_->log();
  const std::string last = read_file(file_).value_or("");
  EXPECT_EQ(sample(last, "sealfs_publishes_total"), publishes) << last;
  EXPECT_EQ(sample(last, "sealfs_open_handles"), 0) << last;
  EXPECT_FALSE(exists_nofollow(file_ + ".tmp"));
}

// Refused before anything is mounted: no FUSE needed.
TEST(MountMetricsOptions, AFileInsideTheMountOrABadFormatIsRefused) {
  TempDir dir("sealfs-prom-inside");
  make_dirs(dir / "B");
  make_dirs(dir / "M");
  ProcessResult inside =
      run_process({sealfs_binary(), "-f", "-o", "metrics_file=" + (dir / "M/x.prom"), dir / "B", dir / "M"},
                  {}, std::chrono::seconds(20));
  EXPECT_EQ(inside.status, 1) << inside.err;
  EXPECT_EQ(inside.err.rfind("sealfs: metrics_file ", 0), 0u) << inside.err;
  EXPECT_EQ(std::count(inside.err.begin(), inside.err.end(), '\n'), 1) << inside.err;
  EXPECT_FALSE(is_fuse_mount(dir / "M"));
  ProcessResult backing =
      run_process({sealfs_binary(), "-f", "-o", "metrics_file=" + (dir / "B/x.prom"), dir / "B", dir / "M"},
                  {}, std::chrono::seconds(20));
  EXPECT_EQ(backing.status, 1) << backing.err;
  EXPECT_NE(backing.err.find("outside the backing directory"), std::string::npos) << backing.err;

  ProcessResult format = run_process({sealfs_binary(), "status", "--format=xml", dir / "M"});
  EXPECT_EQ(format.status, 2);
  EXPECT_NE(format.err.find("--format must be json or prometheus"), std::string::npos) << format.err;
}

}  // namespace
}  // namespace sealfs::test
