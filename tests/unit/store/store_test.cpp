// Store: opening B, visibility rules (R2, R3, R4, R7, R10), creation over
// hidden objects, damage and bad manifests.
#include "core/store/store.hpp"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <linux/capability.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "core/base/digest.hpp"
#include "core/manifest/manifest.hpp"
#include "core/manifest/manifest_file.hpp"
#include "core/store/publish.hpp"
#include "tests/support/store_fixture.hpp"

namespace sealfs::test {
namespace {

TEST_F(StoreTest, OpenCreatesPrivateQuarantine) {
  struct stat st {};
  ASSERT_EQ(::lstat(B(".sealfs/quarantine").c_str(), &st), 0);
  EXPECT_TRUE(S_ISDIR(st.st_mode));
  EXPECT_EQ(st.st_mode & 0777, 0700u);
  auto root = store().root();
  ASSERT_TRUE(root.ok());
  EXPECT_EQ(root->kind, ObjectKind::root);
}

TEST_F(StoreTest, OpenRefusesMissingSymlinkedAndUnknownValidator) {
  EXPECT_EQ(Store::open_backing(B("missing"), test_profile(), {}).code(), ENOENT);
  ASSERT_EQ(::symlink(B().c_str(), B("tmp/link").c_str()), 0);
  EXPECT_EQ(Store::open_backing(B("tmp/link"), test_profile(), {}).code(), ENOTDIR);
  Profile p = test_profile();
  p.validators.push_back({"**/*.so", "no-such-validator"});
  EXPECT_EQ(Store::open_backing(B(), p, {}).code(), EINVAL);
}

TEST_F(StoreTest, NamesAreSingleComponents) {
  UniqueFd root = dir("");
  for (std::string_view bad : {"", ".", "..", "a/b", "/etc/passwd"}) {
    EXPECT_EQ(store().lookup(root.get(), bad).code(), EINVAL) << bad;
    EXPECT_EQ(store().create(root.get(), bad, 0644, O_WRONLY).code(), EINVAL) << bad;
    EXPECT_EQ(store().mkdir(root.get(), bad, 0755).code(), EINVAL) << bad;
    EXPECT_EQ(store().unlink(root.get(), bad).code(), EINVAL) << bad;
    EXPECT_EQ(store().rmdir(root.get(), bad).code(), EINVAL) << bad;
    EXPECT_EQ(store().rename(root.get(), bad, root.get(), "x", 0).code(), EINVAL) << bad;
    EXPECT_EQ(store().rename(root.get(), "tmp", root.get(), bad, 0).code(), EINVAL) << bad;
  }
  EXPECT_TRUE(is_reserved_name(".sealfs-anything"));
  EXPECT_FALSE(is_reserved_name("sealfs"));
}

TEST_F(StoreTest, ReservedNamesAreInvisibleAndCannotBeCreated) {
  UniqueFd root = dir("");
  EXPECT_EQ(store().lookup(root.get(), ".sealfs").code(), ENOENT);
  EXPECT_EQ(listed("").count(".sealfs"), 0u);
  EXPECT_EQ(store().create(root.get(), ".sealfs-x", 0644, O_WRONLY).code(), EPERM);
  EXPECT_EQ(store().mkdir(root.get(), ".sealfs2", 0755).code(), EPERM);
  EXPECT_EQ(store().symlink(root.get(), ".sealfs-l", "x").code(), EPERM);
  EXPECT_EQ(store().mknod(root.get(), ".sealfs-f", S_IFIFO | 0644, 0).code(), EPERM);
  EXPECT_EQ(store().rename(root.get(), "tmp", root.get(), ".sealfs-t", 0).code(), EPERM);
  EXPECT_EQ(store().rename(root.get(), ".sealfs", root.get(), "stolen", 0).code(), ENOENT);
  EXPECT_EQ(store().unlink(root.get(), ".sealfs").code(), ENOENT);
  EXPECT_TRUE(exists_nofollow(B(".sealfs/quarantine")));
  EXPECT_GE(store().metrics().hidden.load(), 1u);
}

TEST_F(StoreTest, ForeignFileIsHiddenButLeftInPlace) {
  write_file(B("foreign.bin"), "written behind the mount");
  EXPECT_EQ(lookup_errno("foreign.bin"), ENOENT);
  EXPECT_EQ(listed("").count("foreign.bin"), 0u);
  EXPECT_EQ(slurp(B("foreign.bin")), "written behind the mount");  // R3: nothing deleted
  EXPECT_EQ(quarantine_slots(), 0u);
}

TEST_F(StoreTest, KindsOfVisibleObjects) {
  make_dirs(B("cont"));
  write_file(B("tmp/scratch"), "x");
  ASSERT_EQ(::mkfifo(B("fifo").c_str(), 0644), 0);
  ASSERT_EQ(::mknod(B("null").c_str(), S_IFCHR | 0644, makedev(1, 3)), 0);
  EXPECT_EQ(lookup("cont")->kind, ObjectKind::container);
  EXPECT_EQ(lookup("tmp")->kind, ObjectKind::volatile_obj);
  EXPECT_EQ(lookup("tmp/scratch")->kind, ObjectKind::volatile_obj);
  EXPECT_EQ(lookup("fifo")->kind, ObjectKind::special);
  EXPECT_EQ(lookup("null")->kind, ObjectKind::special);  // R10: device nodes as FIFOs
  EXPECT_EQ(listed(""), (std::set<std::string>{"cont", "tmp", "fifo", "null"}));
}

TEST_F(StoreTest, DeviceNodesAndFifosAreMadeAsSpecialObjects) {
  UniqueFd root = dir("");
  for (const auto& [name, mode, rdev] :
       {std::tuple{"dev", S_IFCHR | 0600, makedev(1, 3)}, std::tuple{"blk", S_IFBLK | 0600, makedev(7, 0)}}) {
    auto made = store().mknod(root.get(), name, static_cast<mode_t>(mode), rdev);
    ASSERT_TRUE(made.ok()) << name << ": " << made.error().message;
    EXPECT_EQ(made->kind, ObjectKind::special) << name;
    EXPECT_EQ(made->st.st_rdev, rdev) << name;
    EXPECT_TRUE(visible(name)) << name;
    struct stat sidecar {};
    EXPECT_NE(::lstat(B(std::string(".sealfs-manifest.") + name).c_str(), &sidecar), 0)
        << name << " was sealed";
  }
  auto fifo = store().mknod(root.get(), "pipe", S_IFIFO | 0644, 0);
  ASSERT_TRUE(fifo.ok()) << fifo.error().message;
  EXPECT_EQ(fifo->kind, ObjectKind::special);
  EXPECT_TRUE(visible("pipe"));
  auto reg = store().mknod(root.get(), "empty", S_IFREG | 0644, 0);
  ASSERT_TRUE(reg.ok()) << reg.error().message;
  EXPECT_EQ(reg->kind, ObjectKind::sealed_file);  // sealed at once, so visible
  EXPECT_EQ(read_visible("empty"), "");
}

TEST_F(StoreTest, CreatedFileIsInProgressThenSealedAtLastClose) {
  UniqueFd root = dir("");
  auto c = store().create(root.get(), "new.bin", 0644, O_WRONLY | O_EXCL);
  ASSERT_TRUE(c.ok()) << c.error().message;
  EXPECT_EQ(c->found.kind, ObjectKind::in_progress);
  add_writer(c->found.st);
  ASSERT_EQ(::write(c->open_fd.get(), "payload", 7), 7);
  EXPECT_EQ(lookup("new.bin")->kind, ObjectKind::in_progress);
  c->open_fd.reset();
  ASSERT_TRUE(store().seal(c->found.fd.get()).ok());
  clear_writers();
  auto f = lookup("new.bin");
  ASSERT_TRUE(f.ok());
  EXPECT_EQ(f->kind, ObjectKind::sealed_file);
  EXPECT_EQ(read_visible("new.bin"), "payload");
  auto sidecar = read_manifest_at(root.get(), ".sealfs-manifest.new.bin");
  ASSERT_TRUE(sidecar.ok());
  EXPECT_EQ(sidecar->manifest.files.at("new.bin").size, 7u);
  EXPECT_EQ(sidecar->manifest.files.at("new.bin").sha256, sha256_of("payload"));
  EXPECT_EQ(store().metrics().seals.load(), 1u);
  EXPECT_EQ(store().create(root.get(), "new.bin", 0644, O_WRONLY | O_EXCL).code(), EEXIST);
}

TEST_F(StoreTest, UnsealedFileWithoutWriterIsHidden) {
  UniqueFd root = dir("");
  auto c = store().create(root.get(), "crashed", 0644, O_WRONLY);
  ASSERT_TRUE(c.ok());
  // The writer went away without a seal (daemon crash): nothing vouches for it.
  EXPECT_EQ(lookup_errno("crashed"), ENOENT);
}

TEST_F(StoreTest, AbandonedWriteIsQuarantined) {
  UniqueFd root = dir("");
  auto c = store().create(root.get(), "half", 0644, O_WRONLY);
  ASSERT_TRUE(c.ok());
  ASSERT_TRUE(store().abandon(c->found.fd.get()).ok());
  EXPECT_FALSE(exists_nofollow(B("half")));
  EXPECT_EQ(quarantine_slots(), 1u);
  EXPECT_EQ(store().metrics().abandoned.load(), 1u);
}

// R2: a check stopped by running out of descriptors is no verdict: the
// lookup answers EMFILE, nothing is quarantined, and the entry is back once
// descriptors are.
TEST_F(StoreTest, OutOfDescriptorsIsAnErrorNotDamage) {
  publish_entry("k", {{"lib.so", "library"}, {"params.pkl", "p"}});
  UniqueFd c = dir("c");  // the fixture's verdict TTL is 0: every lookup checks again
  struct rlimit old {};
  ASSERT_EQ(::getrlimit(RLIMIT_NOFILE, &old), 0);
  std::vector<UniqueFd> filler;
  int answer = 0;
  {
    struct rlimit low = old;
    low.rlim_cur = 256;
    ASSERT_EQ(::setrlimit(RLIMIT_NOFILE, &low), 0);
    for (;;) {  // take every descriptor left
      UniqueFd fd(::open("/dev/null", O_RDONLY | O_CLOEXEC));
      if (!fd) break;
      filler.push_back(std::move(fd));
    }
    answer = store().lookup(c.get(), "k").code();
    filler.clear();
    ASSERT_EQ(::setrlimit(RLIMIT_NOFILE, &old), 0);
  }
  EXPECT_EQ(answer, EMFILE);
  EXPECT_EQ(quarantine_slots(), 0u);
  EXPECT_TRUE(store().lookup(c.get(), "k").ok());
  EXPECT_EQ(read_visible("c/k/lib.so"), "library");
}

// A cap on the work one planted entry can cause: a hashed record above the
// profile's max_file_size is damage without a read; a publish of such a file
// is refused with EFBIG.
TEST_F(StoreTest, FilesAboveTheProfilesMaxSizeAreNeverHashed) {
  profile().max_file_size = 1000;
  open_store();
  make_dirs(B("c/planted"));
  {
    UniqueFd fd(::open(B("c/planted/lib.so").c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0644));
    ASSERT_TRUE(fd.valid());
    ASSERT_EQ(::ftruncate(fd.get(), 1ll << 40), 0);  // 1 TiB, sparse
  }
  Manifest m;
  m.files["lib.so"] = FileRecord{1ull << 40, sha256_of("x"), std::nullopt};
  write_file(B("c/planted/.sealfs-manifest"), serialize_manifest(m));
  const auto hashed = store().metrics().bytes_hashed.load();
  UniqueFd c = dir("c");
  EXPECT_EQ(store().lookup(c.get(), "planted").code(), ENOENT);
  EXPECT_EQ(store().metrics().bytes_hashed.load(), hashed);
  EXPECT_EQ(quarantine_slots(), 1u);
  stage("tmp/big", {{"lib.so", std::string(2000, 'b')}});
  EXPECT_EQ(rename("tmp/big", "c/big").code(), EFBIG);
  EXPECT_FALSE(exists_nofollow(B("c/big")));
}

// A seal racing a move of the directory above the file, inside the entry
// c/k: d2/d0/f3 written in place (in progress until its seal), d2 moved to
// d0/d2 (fsmix entry seed 12). The record must follow the file.
class SealDuringDirMoveTest : public StoreTest {
 protected:
  // c/k published, d2/d0/f3 written through M; returns its O_PATH fd.
  UniqueFd written_in_place() {
    publish_entry("k", {{"d2/d0/f3", "old"}, {"d0/x", "x"}});
    struct stat st {};
    EXPECT_EQ(::stat(B("c/k/d2/d0/f3").c_str(), &st), 0);
    add_writer(st);
    write_file(B("c/k/d2/d0/f3"), "written in place");
    return UniqueFd(::open(B("c/k/d2/d0/f3").c_str(), O_PATH | O_NOFOLLOW | O_CLOEXEC));
  }
  Status move_dir() { return rename("c/k/d2", "c/k/d0/d2"); }
  // The entry still shows both files, and lists the file at its new key only.
  void expect_record_followed_the_file() {
    EXPECT_EQ(read_visible("c/k/d0/d2/d0/f3"), "written in place");
    EXPECT_EQ(read_visible("c/k/d0/x"), "x");
    UniqueFd k = dir("c/k");
    auto m = read_manifest_at(k.get(), ".sealfs-manifest");
    ASSERT_TRUE(m.ok()) << m.error().message;
    EXPECT_EQ(m->manifest.files.count("d2/d0/f3"), 0u);
    ASSERT_EQ(m->manifest.files.count("d0/d2/d0/f3"), 1u);
    EXPECT_EQ(m->manifest.files.at("d0/d2/d0/f3").sha256, sha256_of("written in place"));
  }
};

// The directory moved while the file was hashed: the record used to be
// written under the old key after the move had rewritten the keys, and the
// entry, listing a missing file, was hidden whole.
TEST_F(SealDuringDirMoveTest, MovedWhileTheFileIsHashed) {
  UniqueFd f = written_in_place();
  ASSERT_TRUE(f);
  bool renamed = false;
  options().fault_hook = [&](std::string_view step) {
    if (step == seal_steps::kDigested && !renamed) {
      renamed = true;
      Status moved = move_dir();
      EXPECT_TRUE(moved.ok()) << moved.error().message;
    }
    return false;
  };
  open_store();
  Status sealed = store().seal(f.get());
  EXPECT_TRUE(sealed.ok()) << sealed.error().message;
  clear_writers();
  ASSERT_TRUE(renamed);
  expect_record_followed_the_file();
}

// A seal that comes after the move dropped the directory's old keys but
// before the rename itself: its record used to be written under the old key
// (the key still led to the file), and a move out of the entry then left the
// entry listing a missing file (fsmix single seed 39). The seal now waits
// for the move (EntryBounds), finds the old key gone and places the file
// again.
TEST_F(SealDuringDirMoveTest, SealedBetweenTheMovesUnlistAndItsRename) {
  UniqueFd f = written_in_place();
  ASSERT_TRUE(f);
  std::thread sealer;
  Status sealed = make_error(EINPROGRESS, "not run");
  options().fault_hook = [&](std::string_view step) {
    if (step == publish_steps::kSourceUnlisted && !sealer.joinable()) {
      clear_writers();
      sealer = std::thread([&] { sealed = store().seal(f.get()); });
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
    }
    return false;
  };
  open_store();
  Status moved = move_dir();
  ASSERT_TRUE(moved.ok()) << moved.error().message;
  ASSERT_TRUE(sealer.joinable());
  sealer.join();
  EXPECT_TRUE(sealed.ok()) << sealed.error().message;
  expect_record_followed_the_file();
}

// A seal that placed and hashed the file before its directory left the
// entry, and writes its record after the move dropped the directory's keys
// but before the rename: the key still led to the file, and the entry c/k
// kept listing d2/d0/f3 after d2 was gone, hidden whole (fsmix single seed
// 39). The record now waits for the move (EntryBounds), finds the old key
// gone, and the file is placed again, in d2's own manifest.
TEST_F(SealDuringDirMoveTest, SealedBetweenTheUnlistAndTheRenameOfAMoveOutOfTheEntry) {
  UniqueFd f = written_in_place();
  ASSERT_TRUE(f);
  std::thread sealer;
  std::atomic<std::thread::id> sealer_id{};  // set by the sealer itself, before its first step
  std::atomic<bool> hashed{false};
  std::atomic<bool> unlisted{false};
  Status sealed = make_error(EINPROGRESS, "not run");
  const auto wait_for = [](const std::atomic<bool>& flag) {
    for (int i = 0; i < 200 && !flag.load(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  };
  options().fault_hook = [&](std::string_view step) {
    if (std::this_thread::get_id() == sealer_id.load()) {
      if (step == seal_steps::kDigested && !hashed.exchange(true)) wait_for(unlisted);
      return false;
    }
    if (step == publish_steps::kFilesSynced && !sealer.joinable()) {
      // The seal places the file while d2 is still a directory of c/k.
      clear_writers();
      sealer = std::thread([&] {
        sealer_id = std::this_thread::get_id();
        sealed = store().seal(f.get());
      });
      wait_for(hashed);
    } else if (step == publish_steps::kSourceUnlisted) {
      unlisted = true;
      std::this_thread::sleep_for(std::chrono::milliseconds(200));  // room for the record, were it not held
    }
    return false;
  };
  open_store();
  Status moved = rename("c/k/d2", "c/d2");
  ASSERT_TRUE(moved.ok()) << moved.error().message;
  ASSERT_TRUE(sealer.joinable());
  sealer.join();
  EXPECT_TRUE(hashed.load());
  EXPECT_TRUE(sealed.ok()) << sealed.error().message;
  options().fault_hook = nullptr;
  open_store();
  EXPECT_EQ(read_visible("c/d2/d0/f3"), "written in place");
  EXPECT_EQ(read_visible("c/k/d0/x"), "x");
  UniqueFd k = dir("c/k");
  auto m = read_manifest_at(k.get(), ".sealfs-manifest");
  ASSERT_TRUE(m.ok()) << m.error().message;
  EXPECT_EQ(m->manifest.files.count("d2/d0/f3"), 0u);
  EXPECT_EQ(quarantine_slots(), 0u);
}

TEST_F(StoreTest, LongNamesGetHashedSidecars) {
  UniqueFd root = dir("");
  const std::string name(250, 'n');
  auto c = store().create(root.get(), name, 0644, O_WRONLY);
  ASSERT_TRUE(c.ok()) << c.error().message;
  ASSERT_EQ(::write(c->open_fd.get(), "long", 4), 4);
  ASSERT_TRUE(store().seal(c->found.fd.get()).ok());
  const std::string sidecar = ".sealfs-manifest.#" + to_hex(sha256_of(name));
  EXPECT_TRUE(exists_nofollow(B(sidecar)));
  auto m = read_manifest_at(root.get(), sidecar);
  ASSERT_TRUE(m.ok());
  EXPECT_EQ(m->manifest.name, name);
  EXPECT_EQ(lookup(name)->kind, ObjectKind::sealed_file);
  // A hashed sidecar that records another name covers nothing.
  Manifest wrong = m->manifest;
  wrong.name = std::string(250, 'x');
  ASSERT_TRUE(write_manifest_atomic(root.get(), sidecar, wrong, false).ok());
  EXPECT_EQ(lookup_errno(name), ENOENT);
}

TEST_F(StoreTest, SymlinkIsSealedWithItsTarget) {
  UniqueFd root = dir("");
  // A size-only name (the test profile's *.src): a hashed one must be a
  // regular file (DESIGN.md, Manifests).
  auto l = store().symlink(root.get(), "link.src", "some/target");
  ASSERT_TRUE(l.ok()) << l.error().message;
  EXPECT_EQ(l->kind, ObjectKind::sealed_file);
  EXPECT_TRUE(visible("link.src"));
  // Retargeted behind the mount: the record no longer matches.
  ASSERT_EQ(::unlink(B("link.src").c_str()), 0);
  ASSERT_EQ(::symlink("other/target", B("link.src").c_str()), 0);
  EXPECT_EQ(lookup_errno("link.src"), ENOENT);
  EXPECT_EQ(quarantine_slots(), 1u);
}

TEST_F(StoreTest, PublishedDirectoryEntryIsVisibleWithManifest) {
  publish_entry("k",
                {{"kernel_lib.so", "ELF-ish bytes"}, {"device_kernel.src", "source"}, {"sub/p.pkl", "p"}});
  EXPECT_EQ(lookup("c/k")->kind, ObjectKind::entry_root);
  EXPECT_EQ(lookup("c/k/kernel_lib.so")->kind, ObjectKind::file_in_entry);
  EXPECT_EQ(lookup("c/k/sub")->kind, ObjectKind::dir_in_entry);
  EXPECT_EQ(read_visible("c/k/sub/p.pkl"), "p");
  EXPECT_EQ(listed("c/k"), (std::set<std::string>{"kernel_lib.so", "device_kernel.src", "sub"}));
  UniqueFd k = dir("c/k");
  auto m = read_manifest_at(k.get(), ".sealfs-manifest");
  ASSERT_TRUE(m.ok());
  EXPECT_EQ(m->manifest.files.size(), 3u);
  EXPECT_EQ(m->manifest.files.at("kernel_lib.so").sha256, sha256_of("ELF-ish bytes"));
  EXPECT_FALSE(m->manifest.files.at("device_kernel.src").sha256.has_value());  // size-only
  EXPECT_EQ(m->manifest.files.at("device_kernel.src").size, 6u);
  EXPECT_GE(store().metrics().hits.load(), 2u);
}

// readdirplus asks through lookup_verified, which must never hash (R8): it
// answers EAGAIN until a real lookup has verified the entry.
TEST_F(StoreTest, LookupVerifiedNeverHashes) {
  options().verdict_ttl = std::chrono::hours(1);
  open_store();
  publish_entry("k", {{"kernel_lib.so", "0123456789abcdef"}, {"params.pkl", "p"}});
  open_store();  // a fresh store: no verdict cached yet
  UniqueFd root = dir("");
  auto container = store().lookup_verified(root.get(), "c");
  ASSERT_TRUE(container.ok()) << container.error().message;  // containers need no verification
  EXPECT_EQ(container->kind, ObjectKind::container);
  UniqueFd c = dir("c");
  const auto hashed = store().metrics().bytes_hashed.load();
  EXPECT_EQ(store().lookup_verified(c.get(), "k").code(), EAGAIN);
  EXPECT_EQ(store().metrics().bytes_hashed.load(), hashed);
  ASSERT_TRUE(store().lookup(c.get(), "k").ok());
  EXPECT_GT(store().metrics().bytes_hashed.load(), hashed);
  auto again = store().lookup_verified(c.get(), "k");
  ASSERT_TRUE(again.ok()) << again.error().message;
  EXPECT_EQ(again->kind, ObjectKind::entry_root);
  EXPECT_EQ(store().lookup_verified(c.get(), "absent").code(), ENOENT);
}

TEST_F(StoreTest, TruncatedEntryIsHiddenQuarantinedAndInvalidated) {
  publish_entry("k", {{"kernel_lib.so", "0123456789abcdef"}, {"params.pkl", "p"}});
  ASSERT_TRUE(visible("c/k/kernel_lib.so"));
  ASSERT_EQ(::truncate(B("c/k/kernel_lib.so").c_str(), 3), 0);
  const auto before = invalidation_count();
  EXPECT_EQ(lookup_errno("c/k"), ENOENT);
  EXPECT_FALSE(exists_nofollow(B("c/k")));
  EXPECT_EQ(quarantine_slots(), 1u);
  EXPECT_EQ(store().metrics().quarantined.load(), 1u);
  EXPECT_GT(invalidation_count(), before);
  // The next save repairs it.
  publish_entry("k", {{"kernel_lib.so", "0123456789abcdef"}, {"params.pkl", "p"}});
  EXPECT_EQ(read_visible("c/k/kernel_lib.so"), "0123456789abcdef");
}

TEST_F(StoreTest, SameSizeZeroOverwriteIsCaught) {
  publish_entry("k", {{"kernel_lib.so", "0123456789abcdef"}});
  ASSERT_TRUE(visible("c/k/kernel_lib.so"));
  write_file(B("c/k/kernel_lib.so"), std::string(16, '\0'));
  EXPECT_EQ(lookup_errno("c/k/kernel_lib.so"), ENOENT);
  EXPECT_EQ(lookup_errno("c/k"), ENOENT);
  EXPECT_EQ(quarantine_slots(), 1u);
}

TEST_F(StoreTest, SizeOnlySourceOverwrittenSameSizeStaysVisible) {
  publish_entry("k", {{"device_kernel.src", "int main(){}"}, {"kernel_lib.so", "lib"}});
  write_file(B("c/k/device_kernel.src"), "int xxxx(){}");
  EXPECT_TRUE(visible("c/k"));
  EXPECT_EQ(read_visible("c/k/device_kernel.src"), "int xxxx(){}");
  EXPECT_EQ(quarantine_slots(), 0u);
}

TEST_F(StoreTest, UnlistedFileInEntryIsHiddenEntryStaysValid) {
  publish_entry("k", {{"a", "a"}});
  write_file(B("c/k/extra"), "not listed");
  EXPECT_EQ(lookup_errno("c/k/extra"), ENOENT);
  EXPECT_TRUE(visible("c/k/a"));
  EXPECT_EQ(listed("c/k"), (std::set<std::string>{"a"}));
}

TEST_F(StoreTest, BadManifestsMakeTheEntryInvalidNeverACrash) {
  for (std::string_view text :
       {"", "{", "{\"sealfs\":2,\"files\":{}}", "[]", "{\"sealfs\":1,\"files\":{\"../x\":{\"size\":1}}}",
        "{\"sealfs\":1,\"files\":{\".sealfs-manifest\":{\"size\":1}}}"}) {
    make_dirs(B("bad"));
    write_file(B("bad/.sealfs-manifest"), text);
    EXPECT_EQ(lookup_errno("bad"), ENOENT) << text;
    EXPECT_FALSE(exists_nofollow(B("bad"))) << text;
  }
  // A manifest that is a directory does not make an entry: a container, and
  // its reserved child stays invisible.
  make_dirs(B("odd/.sealfs-manifest"));
  EXPECT_EQ(lookup("odd")->kind, ObjectKind::container);
  EXPECT_TRUE(listed("odd").empty());
}

TEST_F(StoreTest, FifoListedInManifestIsInvalidWithoutHanging) {
  make_dirs(B("e"));
  ASSERT_EQ(::mkfifo(B("e/f").c_str(), 0644), 0);
  Manifest m;
  m.files["f"] = FileRecord{0, sha256_of(""), std::nullopt};
  UniqueFd e = dir("e");
  ASSERT_TRUE(write_manifest_atomic(e.get(), ".sealfs-manifest", m, false).ok());
  EXPECT_EQ(lookup_errno("e"), ENOENT);
}

// While alive, this thread works without CAP_DAC_OVERRIDE and
// CAP_DAC_READ_SEARCH (capabilities are per thread), so that a test running
// as root meets file modes as an ordinary user would.
class WithoutDacOverride {
 public:
  WithoutDacOverride() {
    if (::syscall(SYS_capget, &header_, saved_) != 0) return;
    __user_cap_data_struct reduced[2] = {saved_[0], saved_[1]};
    reduced[0].effective &= ~((1u << CAP_DAC_OVERRIDE) | (1u << CAP_DAC_READ_SEARCH));
    active_ = ::syscall(SYS_capset, &header_, reduced) == 0;
  }
  ~WithoutDacOverride() {
    if (active_) ::syscall(SYS_capset, &header_, saved_);
  }
  WithoutDacOverride(const WithoutDacOverride&) = delete;
  WithoutDacOverride& operator=(const WithoutDacOverride&) = delete;
  bool active() const { return active_; }

 private:
  __user_cap_header_struct header_{_LINUX_CAPABILITY_VERSION_3, 0};
  __user_cap_data_struct saved_[2]{};
  bool active_ = false;
};

TEST_F(StoreTest, UnreadableListedFileMakesEntryInvalid) {
  publish_entry("k", {{"a", "a"}});
  open_store();  // nothing cached: the lookup must read the file
  ASSERT_EQ(::chmod(B("c/k/a").c_str(), 0), 0);
  WithoutDacOverride unprivileged;
  ASSERT_TRUE(unprivileged.active() || ::geteuid() != 0) << "cannot drop CAP_DAC_OVERRIDE";
  EXPECT_EQ(lookup_errno("c/k"), ENOENT);
}

TEST_F(StoreTest, ForeignEntryWithoutManifestIsReplacedByPublish) {
  make_dirs(B("c/k"));
  write_file(B("c/k/kernel_lib.so"), "old foreign");
  EXPECT_EQ(lookup("c/k")->kind, ObjectKind::container);
  EXPECT_EQ(lookup_errno("c/k/kernel_lib.so"), ENOENT);  // miss
  stage("tmp/new", {{"kernel_lib.so", "fresh"}});
  Status s = rename("tmp/new", "c/k");
  ASSERT_TRUE(s.ok()) << s.error().message;
  EXPECT_EQ(read_visible("c/k/kernel_lib.so"), "fresh");
  EXPECT_EQ(quarantine_slots(), 1u);  // the foreign one, kept
}

TEST_F(StoreTest, CreateOverHiddenObjectQuarantinesItFirst) {
  write_file(B("name"), "foreign");
  UniqueFd root = dir("");
  auto c = store().create(root.get(), "name", 0644, O_WRONLY | O_EXCL);
  ASSERT_TRUE(c.ok()) << c.error().message;
  EXPECT_EQ(quarantine_slots(), 1u);
  struct stat st {};
  ASSERT_EQ(::fstat(c->open_fd.get(), &st), 0);
  EXPECT_EQ(st.st_size, 0);
  // mkdir over a hidden file, symlink over another.
  write_file(B("d"), "foreign");
  EXPECT_TRUE(store().mkdir(root.get(), "d", 0755).ok());
  write_file(B("l.src"), "foreign");
  EXPECT_TRUE(store().symlink(root.get(), "l.src", "t").ok());
  EXPECT_EQ(quarantine_slots(), 3u);
  EXPECT_EQ(store().mkdir(root.get(), "d", 0755).code(), EEXIST);
}

}  // namespace
}  // namespace sealfs::test
