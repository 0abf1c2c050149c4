// Issue 12, items 4 and 5, on a real mount (label "hostile"): the
// quarantine's byte cap counts allocated blocks, so one sparse abandoned
// write no longer evicts the evidence quarantined before it; and a
// quarantine the daemon cannot complete for want of descriptors (its
// RLIMIT_NOFILE lowered with prlimit) leaves no empty slot behind.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/resource.h>

#include <algorithm>
#include <cstdio>
#include <optional>

#include "tests/mount/daemon_fd_limit.hpp"
#include "tests/mount/mount_test_util.hpp"
#include "tests/support/process.hpp"

namespace sealfs::test {
namespace {

class HostileQuarantine : public MountTest {
 protected:
  // A writer (another process) creates name through the mount, writes data
  // at offset, and dies of SIGKILL with the file still open (after
  // before_exit, when given): R4 abandons it into the quarantine. Returns
  // its exit status; a step that failed in the writer fails the test.
  int abandoned_write(const std::string& name, const std::string& data, off_t offset,
                      const std::function<void()>& before_exit = {}) {
    HeldWriter writer(mount_->m(name), data, offset);
    EXPECT_EQ(writer.error(), "") << name << "\n" << mount_->log();
    if (writer.error().empty() && before_exit) before_exit();
    return writer.end(HeldWriter::kKilled);
  }

  std::vector<std::string> slots() const {
    std::vector<std::string> out;
    for (const auto& n : list_dir(mount_->b(".sealfs/quarantine")))
      if (n != "." && n != "..") out.push_back(n);
    std::sort(out.begin(), out.end());
    return out;
  }
  std::string slot_path(const std::string& slot) const { return mount_->b(".sealfs/quarantine/" + slot); }
  // The slot holding an object named name, if any.
  std::optional<std::string> slot_of(const std::string& name) const {
    for (const auto& s : slots())
      if (lstat_errno(slot_path(s) + "/" + name) == 0) return s;
    return std::nullopt;
  }
};

// Issue 12, item 4. The default cap is 1 GiB; the sparse file is 4 GiB long
// and holds one block. It used to evict both earlier slots.
TEST_F(HostileQuarantine, SparseAbandonedWriteKeepsEarlierEvidence) {
  for (const char* n : {"first", "second"}) {
    ASSERT_EQ(abandoned_write(n, std::string("evidence of ") + n, 0), 128 + SIGKILL);
    ASSERT_TRUE(eventually([&] { return slot_of(n).has_value(); })) << n << " was not quarantined\n"
                                                                    << mount_->log();
  }
  constexpr off_t kFar = off_t{4} << 30;
  ASSERT_EQ(abandoned_write("sparse", "x", kFar - 1), 128 + SIGKILL);
  ASSERT_TRUE(eventually([&] { return slot_of("sparse").has_value(); })) << mount_->log();
  struct stat st {};
  ASSERT_EQ(::lstat((slot_path(*slot_of("sparse")) + "/sparse").c_str(), &st), 0);
  EXPECT_EQ(st.st_size, kFar);
  EXPECT_EQ(read_file(slot_path(slot_of("first").value_or("?")) + "/first"), "evidence of first")
      << mount_->log();
  EXPECT_EQ(read_file(slot_path(slot_of("second").value_or("?")) + "/second"), "evidence of second");
  EXPECT_EQ(slots().size(), 3u) << mount_->log();
  EXPECT_EQ(mount_->log().find("quarantine: removed"), std::string::npos) << mount_->log();
}

// Issue 12, item 5. Abandoned writes while the daemon has 0, 1, 2 … free
// descriptors: every slot left in the quarantine holds its reason.json and
// an object (empty slots used to be left after EMFILE), and the daemon
// serves normally once its limit is back.
TEST_F(HostileQuarantine, DescriptorExhaustionLeavesNoEmptySlot) {
  for (int free = 0; free <= 8; ++free) {
    const std::string name = "w" + std::to_string(free);
    // Lowered only around the writer's exit and what follows it (FLUSH,
    // RELEASE, the quarantine), once its file is open.
    std::optional<DaemonFdLimit> budget;
    ASSERT_EQ(abandoned_write(name, "abandoned " + name, 0,
                              [&] { budget.emplace(mount_->daemon_pid(), FreeDescriptors{free}); }),
              128 + SIGKILL);
    ASSERT_TRUE(budget && budget->ok()) << (budget ? budget->error() : "not lowered");
    // Whatever the daemon managed, it has done once the name is gone from M
    // or a moment has passed.
    eventually([&] { return lstat_errno(mount_->m(name)) == ENOENT; }, std::chrono::milliseconds(500));
    budget.reset();
    for (const auto& s : slots()) {
      EXPECT_EQ(lstat_errno(slot_path(s) + "/reason.json"), 0) << "with " << free << " free: " << s << "\n"
                                                               << mount_->log();
      EXPECT_GE(list_dir(slot_path(s)).size(), 4u)  // ".", "..", reason.json, the object
          << "with " << free << " free: an empty slot " << s << "\n"
          << mount_->log();
    }
  }
  const std::string log = mount_->log();
  std::size_t failures = 0;
  for (std::size_t at = 0; (at = log.find("cannot quarantine", at)) != std::string::npos; ++at) ++failures;
  std::printf("9 abandoned writes: %zu slots, %zu quarantines failed\n", slots().size(), failures);
  write_file(mount_->m("after"), "served");
  EXPECT_EQ(read_file(mount_->m("after")), "served");
}

}  // namespace
}  // namespace sealfs::test
