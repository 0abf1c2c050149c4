#include "core/base/digest.hpp"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <string>

#include "core/base/cancel.hpp"
#include "core/base/unique_fd.hpp"
#include "tests/support/temp_dir.hpp"

namespace sealfs {
namespace {

// FIPS 180-2 / NIST test vectors.
constexpr std::string_view kEmpty = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";
constexpr std::string_view kAbc = "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad";
constexpr std::string_view kTwoBlock = "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1";
constexpr std::string_view kMillionA = "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0";

UniqueFd open_read(const std::string& path) { return UniqueFd(::open(path.c_str(), O_RDONLY | O_CLOEXEC)); }

TEST(Digest, KnownVectors) {
  EXPECT_EQ(to_hex(sha256_of("")), kEmpty);
  EXPECT_EQ(to_hex(sha256_of("abc")), kAbc);
  EXPECT_EQ(to_hex(sha256_of("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq")), kTwoBlock);
  EXPECT_EQ(to_hex(sha256_of(std::string(1000000, 'a'))), kMillionA);
}

TEST(Digest, HasherStreamsAndIsReusableAfterFinish) {
  Sha256Hasher h;
  std::string million(1000000, 'a');
  for (std::size_t i = 0; i < million.size(); i += 4099) h.update(std::string_view(million).substr(i, 4099));
  EXPECT_EQ(to_hex(h.finish()), kMillionA);
  h.update("abc");  // finish() re-armed the hasher
  EXPECT_EQ(to_hex(h.finish()), kAbc);
  EXPECT_EQ(to_hex(h.finish()), kEmpty);
}

TEST(Digest, HasherAcceptsByteSpansAndMoves) {
  std::string abc = "abc";
  Sha256Hasher a;
  a.update(std::as_bytes(std::span(abc.data(), abc.size())));
  Sha256Hasher b(std::move(a));
  EXPECT_EQ(to_hex(b.finish()), kAbc);
  Sha256Hasher c;
  c = std::move(b);
  c.update(std::span<const std::byte>());  // empty update is a no-op
  EXPECT_EQ(to_hex(c.finish()), kEmpty);
}

TEST(Digest, HexRoundTrip) {
  auto parsed = sha256_from_hex(kAbc);
  ASSERT_TRUE(parsed.ok()) << parsed.error().message;
  EXPECT_EQ(*parsed, sha256_of("abc"));
  EXPECT_EQ(to_hex(*parsed), kAbc);
  Sha256 zero{};
  EXPECT_EQ(to_hex(zero), std::string(64, '0'));
}

TEST(Digest, HexRejectsAnythingButSixtyFourLowercaseDigits) {
  std::string upper(kAbc);
  upper[0] = 'B';
  std::string with_nul(kAbc);
  with_nul[10] = '\0';
  const std::string bad[] = {"",      std::string(kAbc.substr(0, 63)), std::string(kAbc) + "0",
                             upper,   std::string(63, '0') + "g",      " " + std::string(kAbc.substr(1)),
                             with_nul};
  for (const auto& s : bad) {
    EXPECT_FALSE(is_sha256_hex(s)) << s;
    auto r = sha256_from_hex(s);
    ASSERT_FALSE(r.ok()) << s;
    EXPECT_EQ(r.code(), EINVAL);
  }
  EXPECT_TRUE(is_sha256_hex(kAbc));
}

TEST(Digest, FdHashesWholeFileFromOffsetZeroAndCountsBytes) {
  test::TempDir dir;
  // Larger than one read block, not a multiple of it.
  std::string data;
  for (int i = 0; data.size() < (3u << 20) + 12345; ++i) data += std::to_string(i) + ",";
  test::write_file(dir / "f", data);
  UniqueFd fd = open_read(dir / "f");
  ASSERT_TRUE(fd);
  ASSERT_EQ(::lseek(fd.get(), 100, SEEK_SET), 100);  // the fd offset must not matter
  std::uint64_t counted = 7;
  auto r = sha256_fd(fd.get(), &counted);
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r->sha256, sha256_of(data));
  EXPECT_EQ(r->size, data.size());
  EXPECT_EQ(counted, 7 + data.size());
  EXPECT_EQ(::lseek(fd.get(), 0, SEEK_CUR), 100);  // and is left untouched
}

TEST(Digest, FdEmptyFile) {
  test::TempDir dir;
  test::write_file(dir / "empty", "");
  UniqueFd fd = open_read(dir / "empty");
  auto r = sha256_fd(fd.get());
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(to_hex(r->sha256), kEmpty);
  EXPECT_EQ(r->size, 0u);
}

TEST(Digest, FdSizesAroundBufferBoundaries) {
  // 64 KiB is the smallest read buffer and 1 MiB the largest: sizes at and
  // next to them exercise the EOF read landing exactly on a block edge.
  test::TempDir dir;
  for (std::size_t size : {std::size_t{1}, std::size_t{65535}, std::size_t{65536}, std::size_t{65537},
                           std::size_t{1} << 20, (std::size_t{1} << 20) + 1, std::size_t{2} << 20}) {
    std::string data(size, '\0');
    for (std::size_t i = 0; i < size; ++i) data[i] = static_cast<char>(i * 131 + size);
    test::write_file(dir / "f", data);
    UniqueFd fd = open_read(dir / "f");
    auto r = sha256_fd(fd.get());
    ASSERT_TRUE(r.ok()) << size;
    EXPECT_EQ(r->size, size);
    EXPECT_EQ(r->sha256, sha256_of(data)) << size;
  }
}

TEST(Digest, FdOnPipeFailsWithEspipe) {
  int p[2];
  ASSERT_EQ(::pipe2(p, O_CLOEXEC), 0);
  UniqueFd rd(p[0]), wr(p[1]);
  auto r = sha256_fd(rd.get());
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.code(), ESPIPE);
}

TEST(Digest, FdErrorsCarryErrno) {
  auto bad_fd = sha256_fd(-1);
  ASSERT_FALSE(bad_fd.ok());
  EXPECT_EQ(bad_fd.code(), EBADF);

  test::TempDir dir;
  UniqueFd d(::open(dir.path().c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  ASSERT_TRUE(d);
  std::uint64_t counted = 0;
  auto on_dir = sha256_fd(d.get(), &counted);
  ASSERT_FALSE(on_dir.ok());
  EXPECT_EQ(on_dir.code(), EISDIR);
  EXPECT_EQ(counted, 0u);
}

// R2: a caller that gives up abandons its hash; a shutdown stops every hash.
TEST(Digest, ACancelledHashStopsWithEintr) {
  test::TempDir dir;
  test::write_file(dir / "f", std::string(4 << 20, 'x'));
  UniqueFd fd(::open((dir / "f").c_str(), O_RDONLY | O_CLOEXEC));
  ASSERT_TRUE(fd.valid());
  bool give_up = false;
  {
    CancelScope scope([](void* flag) { return *static_cast<bool*>(flag); }, &give_up);
    EXPECT_TRUE(sha256_fd(fd.get()).ok());
    give_up = true;
    EXPECT_EQ(sha256_fd(fd.get()).code(), EINTR);
  }
  EXPECT_TRUE(sha256_fd(fd.get()).ok()) << "the scope outlived itself";
}

}  // namespace
}  // namespace sealfs
