// FUSE passthrough (issue 25, fs/fuse/passthrough.hpp) on a real mount: a
// read-only open of a sealed file is answered with a backing file, so its
// reads and mappings never reach the daemon, while every rule that an open
// enforces still holds: damage behind the mount is a miss at the next open,
// an R6 replacement is what the next open reads (old opens keep the old
// bytes), a quarantined file is never handed out, and a write open of a file
// read through passthrough is refused (ETXTBSY) rather than failed by the
// kernel. On the libfuse 3.14 build these tests say why they do not apply.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "core/base/unique_fd.hpp"
#include "tests/mount/mount_test_util.hpp"
#include "tests/mount/passthrough_util.hpp"

namespace sealfs::test {
namespace {

std::string pattern(std::size_t size, int seed) {
  std::string data(size, '\0');
  for (std::size_t i = 0; i < size; ++i) data[i] = static_cast<char>(i * 7 + i / 4096 + seed);
  return data;
}

std::string pread_all(int fd, std::size_t size) {
  std::string got(size, '\0');
  std::size_t done = 0;
  while (done < size) {
    const ssize_t n = ::pread(fd, got.data() + done, size - done, static_cast<off_t>(done));
    if (n <= 0) break;
    done += static_cast<std::size_t>(n);
  }
  got.resize(done);
  return got;
}

int open_errno(const std::string& path, int flags) {
  UniqueFd fd(::open(path.c_str(), flags | O_CLOEXEC));
  return fd ? 0 : errno;
}

// A profile with a volatile area for R6 publishes.
std::string write_profile(const TempDir& dir) {
  const std::string path = dir / "pt-profile.json";
  write_file(path, R"({"name":"pt","volatile":["tmp/**"]})");
  return path;
}

class Passthrough : public MountTest {
 protected:
  MountConfig config() const override {
    return MountConfig::with({"passthrough,profile=" + write_profile(profile_dir_)});
  }
  void SetUp() override {
    SEALFS_REQUIRE_FUSE();
    SEALFS_REQUIRE_PASSTHROUGH();
    MountTest::SetUp();
    if (!mounted()) return;
    make_dirs(m("tmp"));
  }
  long count(const std::string& name) const { return daemon_counter(*mount_, name); }
  // A file written through the mount and sealed at its close.
  void seal(const std::string& rel, const std::string& data) {
    write_file(m(rel), data);
    ASSERT_TRUE(eventually([&] { return lstat_errno(b(".sealfs-manifest." + rel)) == 0; })) << rel;
  }

  TempDir profile_dir_{"sealfs-pt-profile"};
};

TEST_F(Passthrough, ASealedFileIsReadWithoutReads) {
  const std::string data = pattern(3 * 1024 * 1024 + 1234, 1);
  seal("big", data);
  ASSERT_FALSE(HasFatalFailure());
  const long reads = count("reads");
  const long opens = count("passthrough_opens");
  {
    UniqueFd fd(::open(m("big").c_str(), O_RDONLY | O_CLOEXEC));
    ASSERT_TRUE(fd.valid()) << std::strerror(errno);
    EXPECT_EQ(pread_all(fd.get(), data.size() + 1), data);
    void* map = ::mmap(nullptr, data.size(), PROT_READ, MAP_PRIVATE, fd.get(), 0);
    ASSERT_NE(map, MAP_FAILED) << std::strerror(errno);
    EXPECT_EQ(std::memcmp(map, data.data(), data.size()), 0) << "the mapping differs";
    ::munmap(map, data.size());
    // A second open of the same inode shares its backing file.
    UniqueFd again(::open(m("big").c_str(), O_RDONLY | O_CLOEXEC));
    ASSERT_TRUE(again.valid()) << std::strerror(errno);
    EXPECT_EQ(pread_all(again.get(), data.size()), data);
  }
  EXPECT_EQ(count("passthrough_opens"), opens + 2);
  EXPECT_EQ(count("reads"), reads) << "READs of a passthrough file reached the daemon";
  // After the last close the inode's backing id is closed; the next open
  // makes another one.
  EXPECT_EQ(read_file(m("big")), data);
  EXPECT_EQ(count("passthrough_opens"), opens + 3);
}

// One backing id per inode while its passthrough opens last, a new one after
// the last RELEASE: opens and closes racing on one file from several threads
// never meet the kernel's EBUSY (another backing file) or its EIO (a mode
// mismatch), and every read returns the file.
TEST_F(Passthrough, RacingOpensAndClosesOfOneFileAllRead) {
  const std::string data = pattern(64 * 1024, 6);
  seal("race", data);
  ASSERT_FALSE(HasFatalFailure());
  constexpr int kThreads = 4;
  constexpr int kRounds = 300;
  std::atomic<int> failures{0};
  std::atomic<int> last_errno{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t)
    threads.emplace_back([&] {
      for (int i = 0; i < kRounds; ++i) {
        UniqueFd fd(::open(m("race").c_str(), O_RDONLY | O_CLOEXEC));
        if (!fd || pread_all(fd.get(), data.size()) != data) {
          last_errno = errno;
          ++failures;
        }
      }
    });
  for (auto& thread : threads) thread.join();
  EXPECT_EQ(failures.load(), 0) << "last errno: " << std::strerror(last_errno.load());
  EXPECT_GE(count("passthrough_opens"), kThreads * kRounds);
}

// The kernel fails a cached open of an inode open in passthrough mode (EIO):
// a write open is refused first, with the error a running executable gives;
// once the readers closed, the in-place rewrite works and is sealed (R4).
TEST_F(Passthrough, AWriteOpenOfAFileReadThroughPassthroughIsTextBusy) {
  seal("f", "first");
  ASSERT_FALSE(HasFatalFailure());
  {
    UniqueFd reader(::open(m("f").c_str(), O_RDONLY | O_CLOEXEC));
    ASSERT_TRUE(reader.valid()) << std::strerror(errno);
    EXPECT_EQ(open_errno(m("f"), O_WRONLY), ETXTBSY);
    EXPECT_EQ(err_of(::truncate(m("f").c_str(), 0)), ETXTBSY);
    EXPECT_EQ(pread_all(reader.get(), 5), "first");
  }
  write_file(m("f"), "second");
  EXPECT_EQ(read_file(m("f")), "second");
  EXPECT_TRUE(eventually([&] { return read_file(b("f")) == std::optional<std::string>("second"); }));
}

// R2/R9 with passthrough: damage behind the mount is a miss at the next open,
// whether or not a passthrough open of the file is still held (the inode's
// backing id is then never reused for it).
TEST_F(Passthrough, DamageBehindTheMountIsAMissAtTheNextOpen) {
  const std::string data = pattern(200 * 1024, 2);
  seal("held", data);
  seal("closed", data);
  ASSERT_FALSE(HasFatalFailure());
  UniqueFd held(::open(m("held").c_str(), O_RDONLY | O_CLOEXEC));
  ASSERT_TRUE(held.valid()) << std::strerror(errno);
  EXPECT_EQ(read_file(m("closed")), data);
  const long opens = count("passthrough_opens");
  ASSERT_TRUE(zero_in_place(b("held")));
  ASSERT_TRUE(zero_in_place(b("closed")));
  EXPECT_EQ(open_errno(m("held"), O_RDONLY), ENOENT) << "a damaged file opened";
  EXPECT_EQ(open_errno(m("closed"), O_RDONLY), ENOENT) << "a damaged file opened";
  EXPECT_EQ(count("passthrough_opens"), opens);
  EXPECT_FALSE(quarantined_files(*mount_).empty());
  // What the descriptor held from before reads is B's file itself: with
  // passthrough the daemon sees no READ to refuse (README "Performance").
  RecordProperty("held_reads_damage", pread_all(held.get(), data.size()) != data ? "yes" : "no");
}

// R6: a file replaced by a publish is read as the new file by the next open,
// while an open from before keeps the old bytes (its own backing file).
TEST_F(Passthrough, AReplacementByRenameIsSeenByTheNextOpen) {
  const std::string old_data = pattern(300 * 1024, 3);
  const std::string new_data = pattern(300 * 1024, 4);
  seal("lib", old_data);
  ASSERT_FALSE(HasFatalFailure());
  UniqueFd old_open(::open(m("lib").c_str(), O_RDONLY | O_CLOEXEC));
  ASSERT_TRUE(old_open.valid()) << std::strerror(errno);
  EXPECT_EQ(pread_all(old_open.get(), old_data.size()), old_data);
  write_file(m("tmp/lib.part"), new_data);
  ASSERT_EQ(err_of(::rename(m("tmp/lib.part").c_str(), m("lib").c_str())), 0) << std::strerror(errno);
  EXPECT_EQ(read_file(m("lib")), new_data) << "the next open read the replaced file";
  EXPECT_EQ(pread_all(old_open.get(), old_data.size()), old_data) << "an old open lost its bytes";
  // Once the publish's own handles are released, new opens are passthrough.
  const long opens = count("passthrough_opens");
  EXPECT_TRUE(
      eventually([&] { return read_file(m("lib")) == new_data && count("passthrough_opens") > opens; }));
}

// A file whose entry is quarantined (its manifest damaged, the file itself
// untouched, a passthrough open of it held) is not opened again: the
// inode's backing file is not handed out.
TEST_F(Passthrough, AQuarantinedFileIsNotOpened) {
  const std::string data = pattern(64 * 1024, 5);
  seal("q", data);
  ASSERT_FALSE(HasFatalFailure());
  UniqueFd held(::open(m("q").c_str(), O_RDONLY | O_CLOEXEC));
  ASSERT_TRUE(held.valid()) << std::strerror(errno);
  const long opens = count("passthrough_opens");
  write_file(b(".sealfs-manifest.q"), "not a manifest");
  EXPECT_EQ(open_errno(m("q"), O_RDONLY), ENOENT) << "a file whose manifest is damaged opened";
  EXPECT_EQ(count("passthrough_opens"), opens);
  EXPECT_TRUE(eventually([&] { return !quarantined_files(*mount_).empty(); })) << mount_->log();
}

// A file in a volatile area is served as it is, on the normal path.
TEST_F(Passthrough, AVolatileFileTakesTheNormalPath) {
  write_file(m("tmp/scratch"), "scratch");
  ASSERT_TRUE(eventually([&] { return count("in_progress") == 0; })) << "the writer's close was not released";
  const long opens = count("passthrough_opens");
  EXPECT_EQ(read_file(m("tmp/scratch")), "scratch");
  EXPECT_EQ(count("passthrough_opens"), opens);
}

// Passthrough is an OPEN reply: a mount without OPEN (-o ro) makes none;
// one with -o ro,keep_open does.
TEST(PassthroughOff, AMountWithoutOpenMakesNoPassthroughOpens) {
  SEALFS_REQUIRE_FUSE();
  SEALFS_REQUIRE_PASSTHROUGH();
  TempDir dir("sealfs-pt");
  make_dirs(dir / "B");
  {
    Mount writer(MountConfig::with({"passthrough"}).backed_by(dir / "B"));
    ASSERT_TRUE(writer.ok()) << writer.error();
    write_file(writer.m("f"), "sealed");
    ASSERT_TRUE(eventually([&] { return lstat_errno(writer.b(".sealfs-manifest.f")) == 0; }));
    EXPECT_EQ(read_file(writer.m("f")), "sealed");
    EXPECT_GT(daemon_counter(writer, "passthrough_opens"), 0) << "a read-write mount made none";
  }
  Mount mount(MountConfig::with({"ro,passthrough"}).backed_by(dir / "B"));
  ASSERT_TRUE(mount.ok()) << mount.error();
  EXPECT_EQ(read_file(mount.m("f")), "sealed");
  EXPECT_EQ(daemon_counter(mount, "passthrough_opens"), 0);
  // -o ro,keep_open: a read-only mount that keeps OPEN, for passthrough.
  Mount with_open(MountConfig::with({"ro,keep_open,passthrough"}).backed_by(dir / "B"));
  ASSERT_TRUE(with_open.ok()) << with_open.error();
  EXPECT_EQ(read_file(with_open.m("f")), "sealed");
  EXPECT_EQ(daemon_counter(with_open, "passthrough_opens"), 1);
  EXPECT_EQ(daemon_counter(with_open, "reads"), 0);
}

}  // namespace
}  // namespace sealfs::test
