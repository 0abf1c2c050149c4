// O_DIRECT through the mount. A direct write is a WRITE like any other, so
// R4 tracks it and seals the file at its last close (an entry's manifest is
// amended); a direct read of a sealed file serves only verified bytes (R2);
// and the alignment a direct write needs is B's own: an unaligned one fails
// or succeeds as the same call does on a plain directory of B's filesystem.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "core/base/digest.hpp"
#include "core/base/unique_fd.hpp"
#include "core/manifest/manifest.hpp"
#include "tests/mount/mount_test_util.hpp"
#include "tests/mount/passthrough_util.hpp"

namespace sealfs::test {
namespace {

constexpr std::size_t kBlock = 4096;

// Page-aligned memory, as direct I/O asks of its caller.
class AlignedBytes {
 public:
  explicit AlignedBytes(std::string_view content)
      : size_(content.size()),
        mem_(static_cast<char*>(std::aligned_alloc(kBlock, (content.size() / kBlock + 1) * kBlock)),
             &std::free) {
    std::memcpy(mem_.get(), content.data(), content.size());
  }
  char* data() const { return mem_.get(); }
  std::size_t capacity() const { return (size_ / kBlock + 1) * kBlock; }

 private:
  std::size_t size_;
  std::unique_ptr<char, decltype(&std::free)> mem_;
};

// size bytes that differ from block to block.
std::string pattern(std::size_t size, char seed = 'a') {
  std::string out(size, '\0');
  for (std::size_t i = 0; i < size; ++i) out[i] = static_cast<char>(seed + (i / 512 + i) % 23);
  return out;
}

// What a comparison failure prints of content: its size and a hash, not
// kilobytes of bytes.
std::string summary(const std::optional<std::string>& content) {
  if (!content) return "unreadable";
  if (content->size() < 100) return *content;  // an error, or short enough to show
  return std::to_string(content->size()) + " bytes, hash " +
         std::to_string(std::hash<std::string>{}(*content));
}

// pwrite's result, or -errno.
long pwrite_result(int fd, const char* data, std::size_t len, off_t off) {
  const ssize_t n = ::pwrite(fd, data, len, off);
  return n < 0 ? -errno : static_cast<long>(n);
}

// The whole file read with O_DIRECT into aligned memory, or "error: …".
std::string read_direct(const std::string& path, std::size_t at_most) {
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_DIRECT | O_CLOEXEC));
  if (!fd) return std::string("error: open: ") + std::strerror(errno);
  AlignedBytes buf(std::string(at_most, '\0'));
  std::string out;
  for (off_t off = 0;;) {
    const ssize_t n = ::pread(fd.get(), buf.data(), buf.capacity(), off);
    if (n < 0) return std::string("error: read: ") + std::strerror(errno);
    if (n == 0) return out;
    out.append(buf.data(), static_cast<std::size_t>(n));
    off += n;
  }
}

// Direct reads and writes at these lengths and offsets: aligned to B's
// logical block (512 or 4096 bytes), or not.
struct Call {
  std::size_t len;
  off_t off;
};
const std::vector<Call> kCalls = {{kBlock, 0},           {kBlock, 100},     {100, kBlock},
                                  {100, 4 * kBlock + 7}, {2 * kBlock, 512}, {kBlock, kBlock}};

// The result of each of kCalls as a direct pread of path (-errno on failure).
std::vector<long> direct_reads(const std::string& path) {
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_DIRECT | O_CLOEXEC));
  if (!fd) return {-errno};
  AlignedBytes buf(std::string(2 * kBlock, '\0'));
  std::vector<long> results;
  for (const Call& c : kCalls) {
    const ssize_t n = ::pread(fd.get(), buf.data(), c.len, c.off);
    results.push_back(n < 0 ? -errno : static_cast<long>(n));
  }
  return results;
}

class DirectIo : public ::testing::Test {
 protected:
  void SetUp() override {
    SEALFS_REQUIRE_FUSE();
    make_dirs(dir_ / "B");
    make_dirs(dir_ / "plain");  // B's filesystem without sealfs, to compare with
    remount();
  }
  void remount(const std::string& options = "") {
    if (mount_) {
      ASSERT_EQ(mount_->unmount(), 0) << mount_->log();
    }
    mount_.reset();
    mount_ = std::make_unique<Mount>(
        (options.empty() ? MountConfig{} : MountConfig::with({options})).backed_by(dir_ / "B"));
    ASSERT_TRUE(mount_->ok()) << mount_->error();
  }
  std::string m(const std::string& rel) const { return mount_->m(rel); }
  std::string b(const std::string& rel) const { return mount_->b(rel); }
  std::string plain(const std::string& rel) const { return dir_ / ("plain/" + rel); }

  // Whether the manifest at manifest_rel (in B) lists name with content.
  bool sealed_as(const std::string& manifest_rel, const std::string& name, const std::string& content) const {
    auto manifest = parse_manifest(read_file(b(manifest_rel)).value_or(""));
    return manifest && manifest->files.count(name) != 0 && manifest->files.at(name).size == content.size() &&
           manifest->files.at(name).sha256 == sha256_of(content);
  }

  TempDir dir_{"sealfs-direct-io"};
  std::unique_ptr<Mount> mount_;
};

TEST_F(DirectIo, ADirectCreateIsSealedAtItsCloseAndReadsBackAlsoAfterARemount) {
  const std::string content = pattern(3 * kBlock);
  const AlignedBytes data(content);
  {
    UniqueFd fd(::open(m("f").c_str(), O_CREAT | O_WRONLY | O_DIRECT | O_CLOEXEC, 0644));
    ASSERT_TRUE(fd) << std::strerror(errno);
    ASSERT_EQ(pwrite_result(fd.get(), data.data(), 2 * kBlock, 0), static_cast<long>(2 * kBlock));
    ASSERT_EQ(pwrite_result(fd.get(), data.data() + 2 * kBlock, kBlock, 2 * kBlock),
              static_cast<long>(kBlock));
  }
  ASSERT_TRUE(eventually([&] { return sealed_as(".sealfs-manifest.f", "f", content); }))
      << "not sealed at its close\n"
      << mount_->log();
  EXPECT_EQ(summary(read_file(m("f"))), summary(content));
  EXPECT_EQ(summary(read_direct(m("f"), content.size())), summary(content));
  remount();
  EXPECT_EQ(summary(read_direct(m("f"), content.size())), summary(content));
  EXPECT_EQ(summary(read_file(m("f"))), summary(content));
  EXPECT_EQ(quarantined_files(*mount_), std::vector<std::string>{});
}

TEST_F(DirectIo, ASealedFileOpensDirectAndServesOnlyVerifiedBytes) {
  const std::string content = pattern(2 * kBlock + 100, 'k');  // the last read is short
  write_file(m("r"), content);
  ASSERT_TRUE(eventually([&] { return sealed_as(".sealfs-manifest.r", "r", content); }));
  // A fresh daemon: the direct open makes its own handle on B (with FUSE
  // passthrough where this build has it, -o passthrough).
  remount(passthrough_expected() ? "passthrough" : "");
  EXPECT_EQ(summary(read_direct(m("r"), content.size())), summary(content));
  // B judges each direct read as it would the caller's own.
  write_file(plain("r"), content);
  EXPECT_EQ(direct_reads(m("r")), direct_reads(plain("r")));
  // With FUSE passthrough those opens were passthrough ones: the kernel
  // read B through its own backing file, opened with the caller's O_DIRECT.
  if (passthrough_expected()) {
    EXPECT_GE(daemon_counter(*mount_, "passthrough_opens"), 2);
  }

  // R2 on the direct path: bytes changed behind the mount after the open
  // are never served (each direct READ reaches the daemon). With FUSE
  // passthrough the kernel reads B itself once the open was verified
  // (passthrough.hpp): there the change is a miss at the next open.
  std::string changed = content;
  changed[10] = 'X';
  if (passthrough_expected()) {
    write_file(b("r"), changed);
    EXPECT_EQ(read_direct(m("r"), content.size()).rfind("error: open:", 0), 0u);
    return;
  }
  UniqueFd fd(::open(m("r").c_str(), O_RDONLY | O_DIRECT | O_CLOEXEC));
  ASSERT_TRUE(fd) << std::strerror(errno);
  AlignedBytes buf(std::string(3 * kBlock, '\0'));
  ASSERT_EQ(::pread(fd.get(), buf.data(), buf.capacity(), 0), static_cast<ssize_t>(content.size()));
  write_file(b("r"), changed);
  const ssize_t n = ::pread(fd.get(), buf.data(), buf.capacity(), 0);
  const int err = errno;
  EXPECT_LT(n, 0) << "a direct read served bytes changed behind the mount";
  if (n < 0) {
    EXPECT_EQ(err, EIO) << std::strerror(err);
  }
}

TEST_F(DirectIo, ADirectWriteIntoADirectoryEntryAmendsTheEntry) {
  // A TileLang entry: written in tmp/, published into c/ by a rename.
  make_dirs(b("c"));
  make_dirs(b("tmp"));
  remount("profile=tilelang");
  const std::string old_data = pattern(2 * kBlock, 'o'), other = "other\n";
  make_dirs(m("tmp/s"));
  write_file(m("tmp/s/data.bin"), old_data);
  write_file(m("tmp/s/other.bin"), other);
  ASSERT_EQ(err_of(::rename(m("tmp/s").c_str(), m("c/e").c_str())), 0) << std::strerror(errno);
  ASSERT_TRUE(sealed_as("c/e/.sealfs-manifest", "data.bin", old_data)) << "not published as an entry";

  const std::string block = pattern(kBlock, 'N');
  const AlignedBytes data(block);
  {
    UniqueFd fd(::open(m("c/e/data.bin").c_str(), O_WRONLY | O_DIRECT | O_CLOEXEC));
    ASSERT_TRUE(fd) << std::strerror(errno);
    ASSERT_EQ(pwrite_result(fd.get(), data.data(), kBlock, kBlock), static_cast<long>(kBlock));
  }
  const std::string now = old_data.substr(0, kBlock) + block;
  EXPECT_TRUE(eventually([&] { return sealed_as("c/e/.sealfs-manifest", "data.bin", now); }))
      << "the entry's manifest was not amended\n"
      << mount_->log();
  EXPECT_EQ(summary(read_file(m("c/e/data.bin"))), summary(now));
  EXPECT_EQ(read_file(m("c/e/other.bin")), other);
  EXPECT_EQ(list_dir(m("c/e")), (std::set<std::string>{".", "..", "data.bin", "other.bin"}));
  remount("profile=tilelang");
  EXPECT_EQ(summary(read_direct(m("c/e/data.bin"), now.size())), summary(now));
  EXPECT_EQ(read_file(m("c/e/other.bin")), other);
  EXPECT_EQ(list_dir(m("c/e")), (std::set<std::string>{".", "..", "data.bin", "other.bin"}));
  EXPECT_EQ(quarantined_files(*mount_), std::vector<std::string>{});
}

// The same direct writes on M and on a plain directory of B's filesystem:
// the same results, call by call, and the same bytes after. (A caller's
// buffer at an unaligned address is not among them: the kernel copies the
// bytes into the request, so the daemon never sees the caller's address,
// and such a write succeeds on M where an ext4 or XFS B refuses it.) Then
// the same direct reads.
TEST_F(DirectIo, AnUnalignedDirectWriteFailsOrSucceedsAsOnAPlainDirectory) {
  struct stat b_st {};
  struct stat plain_st {};
  ASSERT_EQ(::stat(b("").c_str(), &b_st), 0);
  ASSERT_EQ(::stat(plain("").c_str(), &plain_st), 0);
  ASSERT_EQ(b_st.st_dev, plain_st.st_dev) << "the plain directory must be on B's filesystem";
  const AlignedBytes data(pattern(2 * kBlock, 'u'));
  const std::vector<Call>& calls = kCalls;
  auto run = [&](const std::string& path) {
    std::vector<long> results;
    UniqueFd fd(::open(path.c_str(), O_CREAT | O_RDWR | O_DIRECT | O_CLOEXEC, 0644));
    if (!fd) return std::vector<long>{-errno};
    for (const Call& c : calls) results.push_back(pwrite_result(fd.get(), data.data(), c.len, c.off));
    return results;
  };
  const std::vector<long> on_plain = run(plain("u"));
  const std::vector<long> on_m = run(m("u"));
  EXPECT_EQ(on_m, on_plain);
  const auto expected = read_file(plain("u"));
  ASSERT_TRUE(expected.has_value());
  EXPECT_TRUE(eventually([&] { return sealed_as(".sealfs-manifest.u", "u", *expected); })) << mount_->log();
  EXPECT_EQ(summary(read_file(m("u"))), summary(expected));
  // And direct reads of the sealed file, which reach B with O_DIRECT too.
  EXPECT_EQ(direct_reads(m("u")), direct_reads(plain("u")));
}

// A caller may drop O_DIRECT from an open file (fcntl F_SETFL): its writes
// are then buffered ones, at any offset, as on a plain directory.
TEST_F(DirectIo, AHandleThatDropsODirectTakesUnalignedWrites) {
  const std::string block = pattern(kBlock, 'd');
  const AlignedBytes data(block);
  {
    UniqueFd fd(::open(m("t").c_str(), O_CREAT | O_RDWR | O_DIRECT | O_CLOEXEC, 0644));
    ASSERT_TRUE(fd) << std::strerror(errno);
    ASSERT_EQ(pwrite_result(fd.get(), data.data(), kBlock, 0), static_cast<long>(kBlock));
    const int flags = ::fcntl(fd.get(), F_GETFL);
    ASSERT_EQ(::fcntl(fd.get(), F_SETFL, flags & ~O_DIRECT), 0) << std::strerror(errno);
    EXPECT_EQ(pwrite_result(fd.get(), "tail", 4, 100), 4);
    EXPECT_EQ(pwrite_result(fd.get(), "end", 3, kBlock), 3);
  }
  std::string expected = block + "end";
  expected.replace(100, 4, "tail");
  EXPECT_TRUE(eventually([&] { return sealed_as(".sealfs-manifest.t", "t", expected); })) << mount_->log();
  EXPECT_EQ(summary(read_file(m("t"))), summary(expected));
}

}  // namespace
}  // namespace sealfs::test
