// R1 (publish by rename, validators) and R6 (POSIX where visible, atomic
// replacement of a file entry) through a real mount.
#include <gtest/gtest.h>
#include <linux/fs.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/wait.h>

#include <algorithm>
#include <atomic>
#include <functional>

#include "core/base/digest.hpp"
#include "core/manifest/manifest.hpp"
#include "tests/mount/mount_test_util.hpp"

namespace sealfs::test {
namespace {

int rename2(const std::string& from, const std::string& to, unsigned flags) {
  return static_cast<int>(::syscall(SYS_renameat2, AT_FDCWD, from.c_str(), AT_FDCWD, to.c_str(), flags));
}

// A profile with a scratch area and the "test-reject" validator on *.bin.
std::string write_test_profile(const TempDir& dir) {
  const std::string path = dir / "test-profile.json";
  write_file(path, R"({"name":"test","volatile":["tmp/**"],"size_only":["**/*.txt"],)"
                   R"("validators":[{"glob":"**/*.bin","validator":"test-reject"}]})");
  return path;
}

class Publish : public MountTest {
 protected:
  MountConfig config() const override {
    return MountConfig::with({"profile=" + write_test_profile(profile_dir_)});
  }
  void SetUp() override {
    MountTest::SetUp();
    if (!mounted()) return;
    ASSERT_EQ(::mkdir(m("tmp").c_str(), 0755), 0) << std::strerror(errno);
  }

  // A directory entry staged in tmp/ and renamed to dst.
  int publish_dir(const std::string& stage, const std::string& dst, const std::string& payload) {
    make_dirs(m("tmp/" + stage));
    write_file(m("tmp/" + stage + "/data.bin"), payload);
    write_file(m("tmp/" + stage + "/notes.txt"), "notes");
    return err_of(::rename(m("tmp/" + stage).c_str(), m(dst).c_str()));
  }
  int publish_file(const std::string& dst, const std::string& payload) {
    const std::string tmp = m("tmp/" + dst + ".part");
    write_file(tmp, payload);
    return err_of(::rename(tmp.c_str(), m(dst).c_str()));
  }

  TempDir profile_dir_{"sealfs-profile"};
};

TEST_F(Publish, R1ManifestRecordsSizesAndDigests) {
  ASSERT_EQ(publish_dir("s", "entry", "payload-bytes"), 0);
  auto manifest = parse_manifest(read_file(b("entry/.sealfs-manifest")).value_or(""));
  ASSERT_TRUE(manifest) << manifest.error().message;
  ASSERT_EQ(manifest->files.size(), 2u);
  EXPECT_EQ(manifest->files.at("data.bin").size, 13u);
  EXPECT_EQ(manifest->files.at("data.bin").sha256, sha256_of("payload-bytes"));
  EXPECT_EQ(manifest->files.at("notes.txt").size, 5u);
  EXPECT_FALSE(manifest->files.at("notes.txt").sha256.has_value());
  EXPECT_EQ(read_file(m("entry/data.bin")), "payload-bytes");
  // A file entry gets a sidecar beside it.
  ASSERT_EQ(publish_file("single.bin", "one"), 0);
  auto sidecar = parse_manifest(read_file(b(".sealfs-manifest.single.bin")).value_or(""));
  ASSERT_TRUE(sidecar) << sidecar.error().message;
  EXPECT_EQ(sidecar->files.at("single.bin").sha256, sha256_of("one"));
  EXPECT_EQ(read_file(m("single.bin")), "one");
}

// Names in tmp/ are cached by the kernel like any other (cache_timeout), so
// right after a publish the kernel still holds the files under the names it
// looked up in tmp/ and sends no LOOKUP. A rewrite at once must still be the
// R4 write of a file in an entry: tracked, and sealed at its close.
TEST_F(Publish, R4RewriteRightAfterPublishIsSealed) {
  make_dirs(m("tmp/s"));
  write_file(m("tmp/s/data.bin"), "first");
  write_file(m("tmp/s/notes.txt"), "notes");
  struct stat st {};
  ASSERT_EQ(::stat(m("tmp/s/data.bin").c_str(), &st), 0);  // the kernel holds tmp/s/data.bin
  ASSERT_EQ(::rename(m("tmp/s").c_str(), m("entry").c_str()), 0) << std::strerror(errno);
  write_file(m("entry/data.bin"), "second, longer");
  EXPECT_TRUE(eventually([&] {
    auto manifest = parse_manifest(read_file(b("entry/.sealfs-manifest")).value_or(""));
    if (!manifest || manifest->files.count("data.bin") == 0) return false;
    return manifest->files.at("data.bin").sha256 == sha256_of("second, longer");
  })) << "the rewrite was not sealed at its close";
  EXPECT_EQ(lstat_errno(m("entry")), 0);
  EXPECT_EQ(read_file(m("entry/data.bin")), "second, longer");
  EXPECT_EQ(read_file(m("entry/notes.txt")), "notes");
}

TEST_F(Publish, R1ValidatorRejectionIsEbadmsgAndPublishesNothing) {
  EXPECT_EQ(publish_dir("bad", "entry", "SEALFS-TEST-REJECT and more"), EBADMSG);
  EXPECT_EQ(lstat_errno(m("entry")), ENOENT);
  EXPECT_EQ(lstat_errno(b("entry")), ENOENT);
  EXPECT_EQ(lstat_errno(m("tmp/bad/data.bin")), 0);  // the source stays where it was
  EXPECT_EQ(publish_file("f.bin", "SEALFS-TEST-REJECT"), EBADMSG);
  EXPECT_EQ(lstat_errno(m("f.bin")), ENOENT);
  // Content the validator accepts publishes fine afterwards.
  EXPECT_EQ(publish_dir("good", "entry", "fine"), 0);
}

TEST_F(Publish, R6RenameOntoVisibleNonEmptyDirectoryIsEnotempty) {
  ASSERT_EQ(publish_dir("a", "entry", "first"), 0);
  EXPECT_EQ(publish_dir("b", "entry", "second"), ENOTEMPTY);
  EXPECT_EQ(read_file(m("entry/data.bin")), "first");
}

TEST_F(Publish, R6NoreplaceOntoVisibleNameIsEexist) {
  ASSERT_EQ(publish_file("f", "old"), 0);
  write_file(m("tmp/g"), "new");
  EXPECT_EQ(err_of(rename2(m("tmp/g"), m("f"), RENAME_NOREPLACE)), EEXIST);
  EXPECT_EQ(read_file(m("f")), "old");
  EXPECT_EQ(err_of(rename2(m("tmp/g"), m("fresh"), RENAME_NOREPLACE)), 0);
  EXPECT_EQ(read_file(m("fresh")), "new");
}

TEST_F(Publish, R6ExchangeOnlyInsideVolatileAreas) {
  ASSERT_EQ(publish_file("f", "published"), 0);
  write_file(m("tmp/x"), "x");
  write_file(m("tmp/y"), "y");
  EXPECT_EQ(err_of(rename2(m("tmp/x"), m("f"), RENAME_EXCHANGE)), EINVAL);
  EXPECT_EQ(read_file(m("f")), "published");
  EXPECT_EQ(err_of(rename2(m("tmp/x"), m("tmp/y"), RENAME_EXCHANGE)), 0);
  EXPECT_EQ(read_file(m("tmp/x")), "y");
  EXPECT_EQ(read_file(m("tmp/y")), "x");
}

// What a reader process saw, in memory shared with the test.
struct ReaderTally {
  std::atomic<bool> stop{false};
  std::atomic<long> reads{0};
  std::atomic<long> enoent{0};
  std::atomic<long> other_errors{0};
  std::atomic<long> mixed{0};
  std::atomic<int> last_errno{0};
};

void reader_loop(const std::string& path, size_t size, ReaderTally& tally) {
  std::string buf(size + 1, '\0');
  while (!tally.stop.load()) {
    UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
    if (!fd) {
      (errno == ENOENT ? tally.enoent : tally.other_errors)++;
      tally.last_errno = errno;
      continue;
    }
    size_t got = 0;
    ssize_t n = 0;
    while ((n = ::read(fd.get(), buf.data() + got, buf.size() - got)) > 0) got += static_cast<size_t>(n);
    if (n < 0) {
      tally.other_errors++;
      tally.last_errno = errno;
      continue;
    }
    // Whole and uniform: all 'A' or all 'B', exactly size bytes.
    const bool whole =
        got == size && (buf.find_first_not_of(buf[0]) >= size) && (buf[0] == 'A' || buf[0] == 'B');
    if (!whole) tally.mixed++;
    tally.reads++;
  }
}

TEST_F(Publish, R6ReplacingAFileEntryIsAtomicForReaders) {
  constexpr size_t kSize = 64 * 1024;
  constexpr int kReplacements = 1000;
  ASSERT_EQ(publish_file("f", std::string(kSize, 'A')), 0);
  void* shared =
      ::mmap(nullptr, sizeof(ReaderTally), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(shared, MAP_FAILED);
  auto* tally = new (shared) ReaderTally();
  const pid_t reader = ::fork();
  ASSERT_GE(reader, 0);
  if (reader == 0) {
    reader_loop(m("f"), kSize, *tally);
    ::_exit(0);
  }
  int failures = 0;
  for (int i = 0; i < kReplacements && failures == 0; ++i) {
    const std::string part = m("tmp/f." + std::to_string(i));
    write_file(part, std::string(kSize, i % 2 ? 'A' : 'B'));
    if (::rename(part.c_str(), m("f").c_str()) != 0) {
      ADD_FAILURE() << "replacement " << i << ": " << std::strerror(errno);
      ++failures;
    }
  }
  tally->stop = true;
  int wstatus = 0;
  ASSERT_EQ(::waitpid(reader, &wstatus, 0), reader);
  EXPECT_EQ(decode_wait_status(wstatus), 0);
  EXPECT_GT(tally->reads.load(), 0);
  EXPECT_EQ(tally->enoent.load(), 0);
  EXPECT_EQ(tally->other_errors.load(), 0) << std::strerror(tally->last_errno.load());
  EXPECT_EQ(tally->mixed.load(), 0);
  RecordProperty("reads", static_cast<int>(tally->reads.load()));
  tally->~ReaderTally();
  ::munmap(shared, sizeof(ReaderTally));
}

// R6 onto an empty directory entry (made by renaming an empty directory into
// place, so it holds its manifest and nothing else), on a generic mount, each
// step compared with the same steps on a plain directory. The random
// operation mix found the entry quarantined as "holding only hidden objects".
class ReplaceEmptyEntry : public MountTest {
 protected:
  MountConfig config() const override { return MountConfig::with({"profile=generic"}); }

  // mkdir x y; mv -T y c; then rename(src, c, flags) for a src made by make_src
  // under root: the errno of that last rename.
  static int replace_c(const std::string& root, const std::function<void(const std::string&)>& make_src,
                       unsigned flags) {
    if (::mkdir((root + "/y").c_str(), 0755) != 0) return -1;
    if (::rename((root + "/y").c_str(), (root + "/c").c_str()) != 0) return -2;
    make_src(root + "/x");
    return err_of(rename2(root + "/x", root + "/c", flags));
  }
  static void empty_dir(const std::string& p) { make_dirs(p); }
  static void dir_with_file(const std::string& p) {
    make_dirs(p);
    write_file(p + "/f", "hello");
  }
  static void plain_file(const std::string& p) { write_file(p, "hello"); }

  static bool is_dir(const std::string& p) {
    struct stat st {};
    return ::lstat(p.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
  }

  TempDir plain_{"sealfs-plain"};
};

TEST_F(ReplaceEmptyEntry, RenameOntoItReplacesItAsOnAPlainDirectory) {
  ASSERT_EQ(replace_c(plain_.path(), empty_dir, 0), 0);
  ASSERT_EQ(replace_c(m(""), empty_dir, 0), 0);
  EXPECT_TRUE(is_dir(m("c")));
  EXPECT_FALSE(is_dir(m("x")));
  EXPECT_EQ(quarantined_files(*mount_), std::vector<std::string>{}) << mount_->log();
  EXPECT_EQ(err_of(::rmdir(m("c").c_str())), 0);  // what replaced it is empty, and visible
}

TEST_F(ReplaceEmptyEntry, ADirectoryWithFilesReplacesItToo) {
  ASSERT_EQ(replace_c(plain_.path(), dir_with_file, 0), 0);
  ASSERT_EQ(replace_c(m(""), dir_with_file, 0), 0);
  EXPECT_EQ(read_file(m("c/f")), "hello");
  EXPECT_EQ(quarantined_files(*mount_), std::vector<std::string>{}) << mount_->log();
}

TEST_F(ReplaceEmptyEntry, AFileOntoItIsEisdirAndItStays) {
  EXPECT_EQ(replace_c(plain_.path(), plain_file, 0), EISDIR);
  EXPECT_EQ(replace_c(m(""), plain_file, 0), EISDIR);
  EXPECT_TRUE(is_dir(m("c")));
  EXPECT_EQ(read_file(m("x")), "hello");
  EXPECT_TRUE(read_file(b("c/.sealfs-manifest")).has_value());
  EXPECT_EQ(quarantined_files(*mount_), std::vector<std::string>{}) << mount_->log();
}

TEST_F(ReplaceEmptyEntry, NoreplaceOntoItIsEexistAndItStays) {
  EXPECT_EQ(replace_c(plain_.path(), empty_dir, RENAME_NOREPLACE), EEXIST);
  EXPECT_EQ(replace_c(m(""), empty_dir, RENAME_NOREPLACE), EEXIST);
  EXPECT_TRUE(is_dir(m("c")));
  EXPECT_TRUE(is_dir(m("x")));
  EXPECT_TRUE(read_file(b("c/.sealfs-manifest")).has_value());
  EXPECT_EQ(quarantined_files(*mount_), std::vector<std::string>{}) << mount_->log();
}

// Hidden things in it (a file put there behind the mount, foreign: R3) do not
// block the rename (R5): the old directory goes to quarantine with them.
TEST_F(ReplaceEmptyEntry, HiddenFilesInItGoToQuarantineAndDoNotBlock) {
  ASSERT_EQ(::mkdir(m("y").c_str(), 0755), 0);
  ASSERT_EQ(::rename(m("y").c_str(), m("c").c_str()), 0);
  write_file(b("c/foreign"), "behind the mount");
  ASSERT_EQ(::mkdir(m("x").c_str(), 0755), 0);
  EXPECT_EQ(err_of(::rename(m("x").c_str(), m("c").c_str())), 0);
  EXPECT_TRUE(is_dir(m("c")));
  EXPECT_FALSE(read_file(b("c/foreign")).has_value());
  const auto q = quarantined_files(*mount_);
  EXPECT_EQ(std::count_if(q.begin(), q.end(), [](const std::string& f) { return f.ends_with("/foreign"); }),
            1)
      << mount_->log();
  // Said as R5 (hidden objects moved out of a name's way), not as damage.
  const auto reason =
      std::find_if(q.begin(), q.end(), [](const std::string& f) { return f.ends_with("/reason.json"); });
  ASSERT_NE(reason, q.end());
  EXPECT_NE(
      read_file(b(".sealfs/quarantine/" + *reason)).value_or("").find("R5: directory holding only hidden"),
      std::string::npos);
}

}  // namespace
}  // namespace sealfs::test
