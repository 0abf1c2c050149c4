// Issue 12, items 7–9, on real mounts (ctest labels "mount;hostile"):
//  7 a symlink record under a hashed name, or one whose target leaves its
//    entry, is never shown; publishing or creating one through M is refused;
//  8 a manifest is no more readable in B than the files it covers, and
//    follows a chmod through M;
//  9 a manifest with a byte-order mark or invalid UTF-8 is malformed.
// B is changed behind the mount's back where the reproduction plants things.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <algorithm>
#include <string>

#include "core/base/digest.hpp"
#include "tests/mount/mount_test_util.hpp"

namespace sealfs::test {
namespace {

class HostileFormat : public MountTest {
 protected:
  MountConfig config() const override { return MountConfig::with({"profile=tilelang", "cache_timeout=0"}); }
  void SetUp() override {
    MountTest::SetUp();
    if (!mounted()) return;
    ASSERT_EQ(::mkdir(m("kernels").c_str(), 0755), 0);
  }
  mode_t mode_in_b(std::string_view rel) const {
    struct stat st {};
    return ::lstat(b(rel).c_str(), &st) == 0 ? st.st_mode & 07777 : 07777777;
  }
  // A file written through M with the given mode; true once it is sealed.
  bool write_through_m(const std::string& rel, const std::string& data, mode_t mode) {
    UniqueFd fd(::open(m(rel).c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, mode));
    if (!fd) return false;
    if (::fchmod(fd.get(), mode) != 0) return false;  // whatever the umask
    if (::write(fd.get(), data.data(), data.size()) != static_cast<ssize_t>(data.size())) return false;
    fd.reset();
    return true;
  }
  static std::string digest(const std::string& data) { return to_hex(sha256_of(data)); }
};

// ---- 7 ------------------------------------------------------------------------

// The reproduction: {"size":11,"symlink":"/etc/shadow"} under *.so.
// Before: kernels/k1/kernel_lib.so was shown, a symlink to /etc/shadow.
TEST_F(HostileFormat, SymlinkRecordUnderAHashedNameIsNeverShown) {
  ASSERT_EQ(::mkdir(b("kernels/k1").c_str(), 0755), 0);
  write_file(b("kernels/k1/params.pkl"), "p");
  ASSERT_EQ(::symlink("/etc/shadow", b("kernels/k1/kernel_lib.so").c_str()), 0);
  write_file(b("kernels/k1/.sealfs-manifest"),
             "{\"files\":{\"kernel_lib.so\":{\"size\":11,\"symlink\":\"/etc/"
             "shadow\"},\"params.pkl\":{\"sha256\":\"" +
                 digest("p") + "\",\"size\":1}},\"sealfs\":1}");
  // A hashed name as a symlink to a sibling, target inside the entry.
  ASSERT_EQ(::mkdir(b("kernels/k2").c_str(), 0755), 0);
  write_file(b("kernels/k2/real.so"), "ELF");
  ASSERT_EQ(::symlink("real.so", b("kernels/k2/kernel_lib.so").c_str()), 0);
  write_file(b("kernels/k2/.sealfs-manifest"),
             "{\"files\":{\"kernel_lib.so\":{\"size\":7,\"symlink\":\"real.so\"},\"real.so\":{\"sha256\":\"" +
                 digest("ELF") + "\",\"size\":3}},\"sealfs\":1}");
  EXPECT_EQ(lstat_errno(m("kernels/k1/kernel_lib.so")), ENOENT);
  EXPECT_EQ(lstat_errno(m("kernels/k1")), ENOENT);
  EXPECT_EQ(lstat_errno(m("kernels/k2")), ENOENT);
  EXPECT_EQ(list_dir(m("kernels")).count("k1"), 0u);
  EXPECT_FALSE(quarantined_files(*mount_).empty());
}

// A relative target that climbs out of the entry, under a size-only name.
// Before: kernels/k3/device_kernel.cu was shown and led to B's parent.
TEST_F(HostileFormat, SymlinkRecordClimbingOutOfItsEntryIsNeverShown) {
  ASSERT_EQ(::mkdir(b("kernels/k3").c_str(), 0755), 0);
  ASSERT_EQ(::symlink("../../../x", b("kernels/k3/device_kernel.cu").c_str()), 0);
  write_file(b("kernels/k3/.sealfs-manifest"),
             "{\"files\":{\"device_kernel.cu\":{\"size\":10,\"symlink\":\"../../../x\"}},\"sealfs\":1}");
  EXPECT_EQ(lstat_errno(m("kernels/k3/device_kernel.cu")), ENOENT);
  EXPECT_EQ(lstat_errno(m("kernels/k3")), ENOENT);
}

// Publishing a staged tree holding such a symlink fails like a validator
// rejection (EBADMSG) and publishes nothing; symlink(2) through M is EPERM.
TEST_F(HostileFormat, PublishingOrCreatingSuchASymlinkIsRefused) {
  ASSERT_EQ(::mkdir(m("tmp").c_str(), 0755), 0);
  ASSERT_EQ(::mkdir(m("tmp/stage").c_str(), 0755), 0);
  ASSERT_TRUE(write_through_m("tmp/stage/real.so", "ELF", 0644));
  ASSERT_EQ(::symlink("real.so", m("tmp/stage/kernel_lib.so").c_str()), 0);  // volatile: allowed there
  EXPECT_EQ(err_of(::rename(m("tmp/stage").c_str(), m("kernels/k").c_str())), EBADMSG);
  EXPECT_EQ(lstat_errno(m("kernels/k")), ENOENT);
  EXPECT_EQ(lstat_errno(b("kernels/k")), ENOENT);
  ASSERT_EQ(::unlink(m("tmp/stage/kernel_lib.so").c_str()), 0);
  ASSERT_EQ(::symlink("../../../etc/passwd", m("tmp/stage/launcher.cpp").c_str()), 0);
  EXPECT_EQ(err_of(::rename(m("tmp/stage").c_str(), m("kernels/k").c_str())), EBADMSG);
  EXPECT_EQ(lstat_errno(b("kernels/k")), ENOENT);
  ASSERT_EQ(::unlink(m("tmp/stage/launcher.cpp").c_str()), 0);
  ASSERT_EQ(::symlink("real.so", m("tmp/stage/launcher.cpp").c_str()), 0);  // size-only, inside: fine
  EXPECT_EQ(err_of(::rename(m("tmp/stage").c_str(), m("kernels/k").c_str())), 0);
  EXPECT_EQ(lstat_errno(m("kernels/k/launcher.cpp")), 0);

  // In a container: any target, but not under a name a validator guards.
  EXPECT_EQ(err_of(::symlink("x", m("kernels/lib.so").c_str())), EPERM);
  EXPECT_EQ(lstat_errno(b("kernels/lib.so")), ENOENT);
  EXPECT_EQ(err_of(::symlink("/etc/shadow", m("kernels/launcher.cpp").c_str())), 0);
  EXPECT_EQ(err_of(::symlink("../x", m("kernels/notes").c_str())), 0);
  // Inside an entry: the target stays in it, and names a validator guards
  // are regular files; a hashed name may be a symlink to a file the entry
  // verifies (the manifest records it).
  EXPECT_EQ(err_of(::symlink("../x", m("kernels/k/device_kernel.h").c_str())), EPERM);
  EXPECT_EQ(err_of(::symlink("real.so", m("kernels/k/other.so").c_str())), EPERM);
  EXPECT_EQ(err_of(::symlink("real.so", m("kernels/k/params.pkl").c_str())), 0);
  EXPECT_EQ(err_of(::symlink("real.so", m("kernels/k/host_kernel.cu").c_str())), 0);
}

// ---- 8 ------------------------------------------------------------------------

// Before: every sidecar and manifest was 0644, whatever the files' modes.
TEST_F(HostileFormat, ManifestsAreNoMoreReadableThanTheFilesTheyCover) {
  ASSERT_TRUE(write_through_m("kernels/secret.bin", "only mine", 0600));
  ASSERT_TRUE(eventually([&] { return lstat_errno(b("kernels/.sealfs-manifest.secret.bin")) == 0; }));
  EXPECT_TRUE(eventually([&] { return mode_in_b("kernels/.sealfs-manifest.secret.bin") == 0600; }))
      << std::oct << mode_in_b("kernels/.sealfs-manifest.secret.bin");
  ASSERT_TRUE(write_through_m("kernels/public.bin", "anyone", 0644));
  ASSERT_TRUE(eventually([&] { return mode_in_b("kernels/.sealfs-manifest.public.bin") == 0644; }));

  // A directory publish covering a 0640 and a 0600 file.
  ASSERT_EQ(::mkdir(m("tmp").c_str(), 0755), 0);
  ASSERT_EQ(::mkdir(m("tmp/s").c_str(), 0755), 0);
  ASSERT_TRUE(write_through_m("tmp/s/a.so", "a", 0640));
  ASSERT_TRUE(write_through_m("tmp/s/params.pkl", "p", 0600));
  ASSERT_EQ(err_of(::rename(m("tmp/s").c_str(), m("kernels/k").c_str())), 0);
  EXPECT_EQ(mode_in_b("kernels/k/.sealfs-manifest"), 0600u);

  // R10: a chmod through M never unseals; the sidecar follows it.
  ASSERT_EQ(::chmod(m("kernels/public.bin").c_str(), 0600), 0);
  EXPECT_EQ(mode_in_b("kernels/.sealfs-manifest.public.bin"), 0600u);
  EXPECT_EQ(read_file(m("kernels/public.bin")), std::optional<std::string>("anyone"));
  ASSERT_EQ(::chmod(m("kernels/public.bin").c_str(), 0644), 0);
  EXPECT_EQ(mode_in_b("kernels/.sealfs-manifest.public.bin"), 0644u);
  ASSERT_EQ(::chmod(m("kernels/k/a.so").c_str(), 0644), 0);
  ASSERT_EQ(::chmod(m("kernels/k/params.pkl").c_str(), 0644), 0);
  EXPECT_EQ(mode_in_b("kernels/k/.sealfs-manifest"), 0644u);
  EXPECT_EQ(read_file(m("kernels/k/a.so")), std::optional<std::string>("a"));
  EXPECT_EQ(quarantined_files(*mount_), std::vector<std::string>{});
}

// ---- 9 ------------------------------------------------------------------------

// Before: both sidecars verified and the files were shown.
TEST_F(HostileFormat, ManifestsWithAByteOrderMarkOrInvalidUtf8AreMalformed) {
  write_file(b("kernels/bom.bin"), "x");
  write_file(b("kernels/.sealfs-manifest.bom.bin"), "\xEF\xBB\xBF{\"files\":{\"bom.bin\":{\"sha256\":\"" +
                                                        digest("x") + "\",\"size\":1}},\"sealfs\":1}");
  write_file(b("kernels/latin.bin"), "x");
  write_file(b("kernels/.sealfs-manifest.latin.bin"),
             "{\"files\":{\"latin.bin\":{\"sha256\":\"" + digest("x") +
                 "\",\"size\":1}},\"note\":\"caf\xe9\",\"sealfs\":1}");
  write_file(b("kernels/good.bin"), "x");
  write_file(b("kernels/.sealfs-manifest.good.bin"),
             "{\"files\":{\"good.bin\":{\"sha256\":\"" + digest("x") +
                 "\",\"size\":1}},\"note\":\"caf\xc3\xa9\",\"sealfs\":1}");
  EXPECT_EQ(lstat_errno(m("kernels/bom.bin")), ENOENT);
  EXPECT_EQ(lstat_errno(m("kernels/latin.bin")), ENOENT);
  EXPECT_EQ(read_file(m("kernels/good.bin")), std::optional<std::string>("x"));
  const auto q = quarantined_files(*mount_);
  for (const char* name : {"bom.bin", "latin.bin"})
    EXPECT_TRUE(std::any_of(q.begin(), q.end(),
                            [&](const std::string& p) { return p.find(name) != std::string::npos; }))
        << name << " is not in quarantine";
}

}  // namespace
}  // namespace sealfs::test
