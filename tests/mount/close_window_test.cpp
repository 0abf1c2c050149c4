// R4's close → seal window. close() returns when FLUSH is answered; the
// kernel sends RELEASE later, and the seal runs after it. The closer's next
// requests (rsync: utimensat, chmod, rename) can reach the daemon before the
// RELEASE or while the seal is hashing. From the moment close() returns the
// file must behave as on a plain directory: never hidden, and whatever needs
// the seal's result waits for it.
//
// Each test widens one window with the test builds' SEALFS_FAULT_DELAY
// ("release": before a RELEASE is handled; "hashing": in the middle of a
// hash), so that the race is hit every run, not one run in three.
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <sys/stat.h>

#include "core/base/digest.hpp"
#include "core/manifest/manifest.hpp"
#include "tests/mount/mount_test_util.hpp"

namespace sealfs::test {
namespace {

constexpr const char* kSlowHash = "SEALFS_FAULT_DELAY=hashing:300";
constexpr const char* kLateRelease = "SEALFS_FAULT_DELAY=release:300";

// A file's content large enough that its hash is not instant anyway.
std::string content(char seed, std::size_t size = 256 * 1024) {
  std::string s(size, '\0');
  for (std::size_t i = 0; i < size; ++i) s[i] = static_cast<char>(seed + static_cast<char>(i * 31 % 251));
  return s;
}

// Create with O_EXCL (as rsync does for its temporary name), write, close.
void write_new(const std::string& path, const std::string& data, mode_t mode = 0600) {
  UniqueFd fd(::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, mode));
  ASSERT_TRUE(fd.valid()) << path << ": " << std::strerror(errno);
  ASSERT_EQ(::write(fd.get(), data.data(), data.size()), static_cast<ssize_t>(data.size()));
}

class CloseWindow : public ::testing::Test {
 protected:
  void mount_with(const char* env, std::vector<std::string> options = {"cache_timeout=1"}) {
    mount_ = std::make_unique<Mount>(MountConfig::with(std::move(options)).with_env(env));
    ASSERT_TRUE(mount_->ok()) << mount_->error();
  }
  std::string m(std::string_view rel) const { return mount_->m(rel); }
  std::string b(std::string_view rel) const { return mount_->b(rel); }

  // The sidecar of rel (a file entry in a container) records data, once the
  // seal that follows the last close has run.
  void expect_sealed_as(const std::string& rel, const std::string& data) {
    const auto slash = rel.rfind('/');
    const std::string dir = slash == std::string::npos ? "" : rel.substr(0, slash + 1);
    const std::string name = slash == std::string::npos ? rel : rel.substr(slash + 1);
    const std::string sidecar = b(dir + ".sealfs-manifest." + name);
    const bool sealed = eventually([&] {
      auto manifest = parse_manifest(read_file(sidecar).value_or(""));
      return manifest && manifest->files.count(name) != 0 &&
             manifest->files.at(name).sha256 == sha256_of(data) && manifest->accept.empty();
    });
    EXPECT_TRUE(sealed) << rel << " is not sealed with its content";
  }

  // After unmounting: no quarantine, and an offline fsck finds nothing wrong.
  void expect_clean_store() {
    EXPECT_EQ(quarantined_files(*mount_), std::vector<std::string>{}) << mount_->log();
    EXPECT_EQ(mount_->unmount(), 0);
    auto fsck = run_process({sealfs_binary(), "fsck", mount_->backing()});
    EXPECT_EQ(fsck.status, 0) << fsck.out << fsck.err;
  }

  std::unique_ptr<Mount> mount_;
};

// rsync's sequence per file: temporary name, write, close, utimensat, chmod,
// rename onto the final name. The times and then the mode change while the
// seal hashes, each during a different read of the file (a seal that gave up
// after seeing the file change twice left it unsealed, hence hidden: rsync's
// rename then failed with ENOENT in one run of three).
TEST_F(CloseWindow, RsyncSequenceWhileTheSealHashes) {
  SEALFS_REQUIRE_FUSE();
  mount_with(kSlowHash);
  const std::string data = content('r');
  write_new(m(".ec.h.XyZ123"), data);
  const struct timespec times[2] = {{1600000000, 0}, {1600000000, 0}};
  ASSERT_EQ(err_of(::utimensat(AT_FDCWD, m(".ec.h.XyZ123").c_str(), times, AT_SYMLINK_NOFOLLOW)), 0);
  std::this_thread::sleep_for(std::chrono::milliseconds(350));
  ASSERT_EQ(err_of(::chmod(m(".ec.h.XyZ123").c_str(), 0644)), 0);
  std::this_thread::sleep_for(std::chrono::milliseconds(400));  // the seal has ended, one way or another
  EXPECT_EQ(lstat_errno(m(".ec.h.XyZ123")), 0) << "a file closed normally is hidden";
  ASSERT_EQ(err_of(::rename(m(".ec.h.XyZ123").c_str(), m("ec.h").c_str())), 0);
  EXPECT_EQ(read_file(m("ec.h")), data);
  struct stat st {};
  ASSERT_EQ(::stat(m("ec.h").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0644u);
  EXPECT_EQ(st.st_mtim.tv_sec, 1600000000);
  EXPECT_EQ(lstat_errno(m(".ec.h.XyZ123")), ENOENT);
  expect_sealed_as("ec.h", data);
  EXPECT_EQ(read_file(m("ec.h")), data);
  expect_clean_store();
}

// The same sequence with the RELEASE arriving after the rename.
TEST_F(CloseWindow, RsyncSequenceBeforeTheRelease) {
  SEALFS_REQUIRE_FUSE();
  mount_with(kLateRelease);
  const std::string data = content('s');
  write_new(m(".ssl.h.AbC"), data);
  // Seen by another lookup, getattr and open at once, as on a plain directory.
  EXPECT_EQ(lstat_errno(m(".ssl.h.AbC")), 0);
  EXPECT_EQ(read_file(m(".ssl.h.AbC")), data);
  ASSERT_EQ(err_of(::chmod(m(".ssl.h.AbC").c_str(), 0640)), 0);
  ASSERT_EQ(err_of(::rename(m(".ssl.h.AbC").c_str(), m("ssl.h").c_str())), 0);
  EXPECT_EQ(read_file(m("ssl.h")), data);
  expect_sealed_as("ssl.h", data);
  std::this_thread::sleep_for(std::chrono::milliseconds(400));  // every delayed RELEASE has run
  EXPECT_EQ(read_file(m("ssl.h")), data);
  struct stat st {};
  ASSERT_EQ(::stat(m("ssl.h").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0640u);
  expect_clean_store();
}

// A truncate by path (no handle) while the seal of the last write hashes.
TEST_F(CloseWindow, TruncateByPathWhileTheSealHashes) {
  SEALFS_REQUIRE_FUSE();
  mount_with(kSlowHash);
  const std::string data = content('t');
  write_new(m("f"), data, 0644);
  ASSERT_EQ(err_of(::truncate(m("f").c_str(), 1000)), 0);
  EXPECT_EQ(read_file(m("f")), data.substr(0, 1000));
  expect_sealed_as("f", data.substr(0, 1000));
  expect_clean_store();
}

// The link-then-unlink publish done before the kernel's RELEASE reaches the
// daemon: the link gives the inode a newer name (and O_PATH fd); the seal at
// the last close must still seal the name the writer wrote, or that name is
// left unsealed and hidden and its unlink fails (seen under TSan in CI).
TEST_F(CloseWindow, LinkAndUnlinkBeforeTheRelease) {
  SEALFS_REQUIRE_FUSE();
  mount_with(kLateRelease);
  const std::string data = content('k');
  write_new(m("written"), data, 0644);
  ASSERT_EQ(err_of(::link(m("written").c_str(), m("linked").c_str())), 0);
  std::this_thread::sleep_for(std::chrono::milliseconds(600));  // past the late RELEASE and its seal
  EXPECT_EQ(read_file(m("written")), data) << "the writer's own name was left unsealed";
  expect_sealed_as("written", data);
  ASSERT_EQ(err_of(::unlink(m("written").c_str())), 0);
  EXPECT_EQ(read_file(m("linked")), data);
  expect_sealed_as("linked", data);
  expect_clean_store();
}

// link (the "link then unlink" publish) and unlink right after the close.
TEST_F(CloseWindow, LinkAndUnlinkWhileTheSealHashes) {
  SEALFS_REQUIRE_FUSE();
  mount_with(kSlowHash);
  const std::string data = content('l');
  write_new(m("tmpname"), data, 0644);
  ASSERT_EQ(err_of(::link(m("tmpname").c_str(), m("final").c_str())), 0);
  ASSERT_EQ(err_of(::unlink(m("tmpname").c_str())), 0);
  EXPECT_EQ(read_file(m("final")), data);
  EXPECT_EQ(lstat_errno(m("tmpname")), ENOENT);
  expect_sealed_as("final", data);
  EXPECT_EQ(lstat_errno(b(".sealfs-manifest.tmpname")), ENOENT) << "a sidecar outlived its file";
  write_new(m("gone"), data, 0644);
  ASSERT_EQ(err_of(::unlink(m("gone").c_str())), 0);
  EXPECT_EQ(lstat_errno(m("gone")), ENOENT);
  std::this_thread::sleep_for(std::chrono::milliseconds(700));
  EXPECT_EQ(lstat_errno(b("gone")), ENOENT);
  EXPECT_EQ(lstat_errno(b(".sealfs-manifest.gone")), ENOENT) << "the seal recreated a removed file's sidecar";
  expect_clean_store();
}

// A second writer opens the file while the first one's seal is running.
TEST_F(CloseWindow, SecondWriterWhileTheSealHashes) {
  SEALFS_REQUIRE_FUSE();
  mount_with(kSlowHash);
  const std::string one = content('1');
  const std::string two = content('2', 100 * 1024);
  write_new(m("f"), one, 0644);
  write_file(m("f"), two);  // O_TRUNC through the mount
  EXPECT_EQ(read_file(m("f")), two);
  expect_sealed_as("f", two);
  EXPECT_EQ(read_file(m("f")), two);
  expect_clean_store();
}

// The directory holding a just-closed file is renamed while the file's seal
// runs, and before its RELEASE: the seal follows the file (a container that
// holds visible files moves as a container; the file keeps its own sidecar).
TEST_F(CloseWindow, DirectoryRenamedAroundTheSeal) {
  SEALFS_REQUIRE_FUSE();
  for (const char* env : {kSlowHash, kLateRelease}) {
    SCOPED_TRACE(env);
    mount_with(env);
    const std::string data = content('d');
    ASSERT_EQ(err_of(::mkdir(m("d").c_str(), 0755)), 0);
    write_new(m("d/f"), data, 0644);
    ASSERT_EQ(err_of(::rename(m("d").c_str(), m("e").c_str())), 0);
    EXPECT_EQ(read_file(m("e/f")), data);
    expect_sealed_as("e/f", data);
    std::this_thread::sleep_for(std::chrono::milliseconds(700));  // every delayed step has run
    EXPECT_EQ(read_file(m("e/f")), data);
    EXPECT_EQ(lstat_errno(b("d")), ENOENT);
    expect_clean_store();
  }
}

// An mmap'd writer: close() sends FLUSH, but RELEASE comes at munmap; writes
// through the mapping in between keep the file in progress and visible.
TEST_F(CloseWindow, MmapWriterIsSealedAtMunmap) {
  SEALFS_REQUIRE_FUSE();
  mount_with(kLateRelease);
  const std::string data = content('m', 64 * 1024);
  UniqueFd fd(::open(m("mapped").c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0644));
  ASSERT_TRUE(fd.valid()) << std::strerror(errno);
  ASSERT_EQ(::ftruncate(fd.get(), static_cast<off_t>(data.size())), 0);
  void* map = ::mmap(nullptr, data.size(), PROT_READ | PROT_WRITE, MAP_SHARED, fd.get(), 0);
  ASSERT_NE(map, MAP_FAILED) << std::strerror(errno);
  fd.reset();  // FLUSH now; RELEASE only at munmap
  std::memcpy(map, data.data(), data.size());
  ASSERT_EQ(::msync(map, data.size(), MS_SYNC), 0);
  EXPECT_EQ(lstat_errno(m("mapped")), 0) << "an mmap'd file in progress was hidden";
  ASSERT_EQ(::munmap(map, data.size()), 0);
  EXPECT_EQ(read_file(m("mapped")), data);
  expect_sealed_as("mapped", data);
  expect_clean_store();
}

// Many rsync-like sequences at once on the default (tilelang) and generic
// profiles, no delay: every file arrives, none is quarantined.
TEST_F(CloseWindow, ManyRsyncSequencesAtOnce) {
  SEALFS_REQUIRE_FUSE();
  for (const char* profile : {"profile=generic", "profile=tilelang"}) {
    SCOPED_TRACE(profile);
    mount_with("SEALFS_FAULT_DELAY=", {"cache_timeout=1", profile});
    ASSERT_EQ(err_of(::mkdir(m("rs").c_str(), 0755)), 0);
    std::vector<std::thread> workers;
    std::atomic<int> failures{0};
    for (int t = 0; t < 4; ++t) {
      workers.emplace_back([&, t] {
        for (int i = 0; i < 25; ++i) {
          const std::string name = "f" + std::to_string(t) + "_" + std::to_string(i);
          const std::string tmp = m("rs/." + name + ".tmp");
          const std::string data =
              content(static_cast<char>('a' + i), 8 * 1024 + static_cast<std::size_t>(i) * 997);
          {
            UniqueFd fd(::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600));
            if (!fd || ::write(fd.get(), data.data(), data.size()) != static_cast<ssize_t>(data.size())) {
              ++failures;
              continue;
            }
          }
          const struct timespec times[2] = {{1600000000, 0}, {1600000000, 0}};
          if (::utimensat(AT_FDCWD, tmp.c_str(), times, AT_SYMLINK_NOFOLLOW) != 0 ||
              ::chmod(tmp.c_str(), 0644) != 0 || ::rename(tmp.c_str(), m("rs/" + name).c_str()) != 0 ||
              read_file(m("rs/" + name)) != data)
            ++failures;
        }
      });
    }
    for (auto& w : workers) w.join();
    EXPECT_EQ(failures.load(), 0);
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
    EXPECT_EQ(list_dir(m("rs")).size(), 100u + 2u);
    expect_clean_store();
  }
}

// A seal that meets a transient error (here EMFILE, injected three times;
// found as stress-ng's dentry stressor leaving files unsealed when the daemon
// ran out of descriptors mid-seal) is tried again: the file closed normally
// ends sealed and visible, and its name's next create does not move it to
// quarantine as a hidden object in the way (R5).
TEST_F(CloseWindow, ASealOutOfDescriptorsIsTriedAgain) {
  SEALFS_REQUIRE_FUSE();
  mount_with("SEALFS_FAULT_ERRNO=last_close:24:3");
  const std::string data = content('e');
  write_new(m("f"), data);
  expect_sealed_as("f", data);
  EXPECT_EQ(lstat_errno(m("f")), 0);
  {
    UniqueFd fd(::open(m("f").c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600));
    ASSERT_TRUE(fd.valid()) << std::strerror(errno);
    ASSERT_EQ(::write(fd.get(), "again", 5), 5);
  }
  expect_sealed_as("f", "again");
  expect_clean_store();
}

// An unmount right after a burst of closes. The kernel sends RELEASE in the
// background and drops the ones it still has queued when the connection
// ends (the daemon's loop then reads ECONNABORTED). Every file was closed,
// so every file is sealed, at exit if not before, and the daemon exits 0.
// Before, only the files whose RELEASE had arrived were sealed; the rest
// were foreign, so hidden, at the next mount (and the daemon exited 1).
TEST_F(CloseWindow, FilesClosedRightBeforeAnUnmountAreSealed) {
  SEALFS_REQUIRE_FUSE();
  mount_with(kLateRelease);
  constexpr int kFiles = 64;  // more RELEASEs than the daemon has threads
  for (int i = 0; i < kFiles; ++i) write_new(m("f" + std::to_string(i)), "file " + std::to_string(i) + "\n");
  EXPECT_EQ(mount_->unmount(), 0) << mount_->log();
  auto fsck = run_process({sealfs_binary(), "fsck", mount_->backing()});
  EXPECT_EQ(fsck.status, 0) << fsck.out << fsck.err;
  EXPECT_NE(fsck.out.find("entries 64, valid 64, invalid 0, foreign 0,"), std::string::npos) << fsck.out;
}

// A stop signal is not the end of every writer: a file whose descriptor one
// process closed (FLUSH came) while another still holds it open (a shell's
// redirection closes its own copy first) is not sealed at the daemon's exit.
// It stays in progress, so foreign (hidden) at the next mount: never a file
// sealed while it was still being written.
TEST_F(CloseWindow, AFileStillOpenAtAStopSignalIsNotSealed) {
  SEALFS_REQUIRE_FUSE();
  mount_ = std::make_unique<Mount>(MountConfig::with({"cache_timeout=1"}));
  ASSERT_TRUE(mount_->ok()) << mount_->error();
  UniqueFd fd(::open(m("partial").c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644));
  ASSERT_TRUE(fd.valid()) << std::strerror(errno);
  ASSERT_EQ(::write(fd.get(), "half", 4), 4);
  UniqueFd copy(::fcntl(fd.get(), F_DUPFD_CLOEXEC, 0));
  ASSERT_TRUE(copy.valid()) << std::strerror(errno);
  fd = UniqueFd();  // one close: FLUSH, no RELEASE (copy holds the file)
  ASSERT_EQ(::kill(mount_->daemon_pid(), SIGTERM), 0);
  EXPECT_EQ(mount_->wait_for_exit(std::chrono::seconds(30)), 0) << mount_->log();
  copy = UniqueFd();
  EXPECT_EQ(mount_->unmount(), 0);
  EXPECT_FALSE(exists_nofollow(b(".sealfs-manifest.partial"))) << "sealed while still open";
  auto fsck = run_process({sealfs_binary(), "fsck", mount_->backing()});
  EXPECT_NE(fsck.out.find("entries 0, valid 0, invalid 0, foreign 1,"), std::string::npos) << fsck.out;
}

}  // namespace
}  // namespace sealfs::test
