// The daemon killed at a step of a store transaction (fault injection, see
// fs/README.md) leaves, after a remount over the same B, the old state or the
// complete new one, and the name can be published or written again:
//  - DaemonCrash: a directory-entry publish (TileLang's save protocol);
//  - FileEntryCrash: a file-entry publish by rename, fresh or replacing a
//    visible file entry (R6), from tmp/ (a volatile area) or from a temporary
//    file written in place and sealed at its close (as ccache does);
//  - SealCrash: the seal at the last close of an in-place write (R4), of a
//    standalone file (sidecar) and of a file inside a published entry
//    (amended into its manifest), new or rewritten; the next daemon
//    finishes a seal cut short from the crashed one's journal.
// Each case checks that the daemon exited with the fault status, so a step
// that is renamed or no longer reached fails the test instead of passing it
// without a crash. Only the one operation under test runs on the faulty
// mount: "manifest_written" is a step of both publishes and seals.
#include <gtest/gtest.h>

#include <algorithm>
#include <string_view>

#include "core/manifest/manifest.hpp"
#include "core/store/publish.hpp"
#include "tests/mount/mount_test_util.hpp"

namespace sealfs::test {
namespace {

namespace step = publish_steps;

constexpr int kFaultExit = 75;  // the daemon's exit status at an injected fault

// Mount backing with SEALFS_FAULT_STEP=at and run act, which must reach that
// step; the daemon must then have exited with kFaultExit.
void crash_daemon_at(const std::string& backing, const std::string& options, std::string_view at,
                     const std::function<void(const Mount&)>& act) {
  Mount mount(
      MountConfig::with({options}).backed_by(backing).with_env("SEALFS_FAULT_STEP=" + std::string(at)));
  ASSERT_TRUE(mount.ok()) << mount.error();
  mount.expect_exit_status(kFaultExit);
  act(mount);
  EXPECT_EQ(mount.wait_for_exit(std::chrono::seconds(20)), kFaultExit)
      << "the daemon did not stop at step " << at << ": " << mount.log();
}

bool quarantine_holds(const Mount& mount, const std::string& data) {
  const auto files = quarantined_files(mount);
  return std::any_of(files.begin(), files.end(), [&](const std::string& rel) {
    return read_file(mount.b(".sealfs/quarantine/" + rel)) == data;
  });
}

// Whether the manifest at manifest_path (in B) records key with data's size.
bool manifest_records(const std::string& manifest_path, const std::string& key, const std::string& data) {
  auto manifest = parse_manifest(read_file(manifest_path).value_or(""));
  if (!manifest) return false;
  auto it = manifest->files.find(key);
  return it != manifest->files.end() && it->second.size == data.size();
}

// Names under dir (through M) other than . and ..
std::set<std::string> visible_names(const std::string& dir) {
  auto names = list_dir(dir);
  names.erase(".");
  names.erase("..");
  return names;
}

// The bytes of one version of a file; sizes differ so that no version can
// pass for another by size.
std::string version(char c, std::size_t size) { return std::string(size, c); }

// The versions a crash case writes: the state before the crash, a file that
// stays beside it, the write cut short by the crash, and the write after the
// remount.
struct Versions {
  std::string old_data = version('o', 5000);
  std::string other_data = version('t', 4000);
  std::string new_data = version('n', 7000);  // longer: overwrites old_data entirely
  std::string next_data = version('x', 3000);
};

// ------------------------------------------------------ directory-entry publish

class DaemonCrash : public ::testing::TestWithParam<std::string_view> {};

TEST_P(DaemonCrash, RemountShowsOldOrCompleteNewState) {
  SEALFS_REQUIRE_FUSE();
  TempDir dir("sealfs-crash");
  make_dirs(dir / "B");
  crash_daemon_at(dir / "B", "profile=tilelang", GetParam(), [](const Mount& mount) {
    ProcessResult saved = tilelang("save", mount.mountpoint(), "k");
    EXPECT_NE(saved.status, 0) << "the publish should have been cut short: " << saved.out;
  });
  ASSERT_FALSE(HasFatalFailure());
  Mount mount(MountConfig::with({"profile=tilelang"}).backed_by(dir / "B"));
  ASSERT_TRUE(mount.ok()) << mount.error();
  ProcessResult loaded = tilelang("load", mount.mountpoint(), "k");
  EXPECT_TRUE(loaded.status == kHit || loaded.status == kMiss) << loaded.status << " " << loaded.out;
  if (loaded.status == kMiss) {
    ProcessResult saved = tilelang("save", mount.mountpoint(), "k");
    EXPECT_EQ(saved.status, 0) << saved.out << saved.err;
  }
  ProcessResult again = tilelang("load", mount.mountpoint(), "k");
  EXPECT_EQ(again.status, kHit) << again.out << again.err;
}

// Every step of a directory publish into a container. Not reached here:
// source_unlisted, amended (moves into or out of an entry), sidecar_final and
// source_cleaned (file publishes only).
INSTANTIATE_TEST_SUITE_P(Steps, DaemonCrash,
                         ::testing::Values(step::kFilesSynced, step::kValidated, step::kManifestWritten,
                                           step::kDstCleared, step::kRenamed, step::kDirSynced),
                         [](const auto& param_info) { return std::string(param_info.param); });

// ----------------------------------------------------------- file-entry publish

struct FileCase {
  bool in_place;  // source written in place and sealed (generic profile), else in tmp/ (tilelang)
  bool replace;   // dst is a visible file entry already (R6)
  std::string_view at;

  std::string options() const { return in_place ? "profile=generic" : "profile=tilelang"; }
  // The temporary name of the n-th version: beside dst (ccache's
  // "<name>.tmp.<suffix>"), or in the volatile tmp/.
  std::string source(int n) const {
    return in_place ? "c/obj.o.tmp." + std::to_string(n) : "tmp/obj.o." + std::to_string(n);
  }
};

// The steps of a file publish into a container, in order (core/store/publish.cpp).
// sidecar_final is reached only when a visible file entry is replaced;
// source_cleaned always (it also removes the sidecar of a sealed source).
// source_unlisted and amended belong to moves into or out of an entry.
std::vector<std::string_view> file_publish_steps(bool replace) {
  std::vector<std::string_view> steps = {step::kFilesSynced,     step::kValidated, step::kDstCleared,
                                         step::kManifestWritten, step::kRenamed,   step::kDirSynced};
  if (replace) steps.push_back(step::kSidecarFinal);
  steps.push_back(step::kSourceCleaned);
  return steps;
}

std::vector<FileCase> file_crashes() {
  std::vector<FileCase> out;
  for (bool replace : {false, true}) {
    for (bool in_place : {false, true}) {
      for (auto at : file_publish_steps(replace)) out.push_back({in_place, replace, at});
    }
  }
  return out;
}

class FileEntryCrash : public ::testing::TestWithParam<FileCase> {};

const std::string kFileDst = "c/obj.o";  // the name every file publish renames onto

// Write version n under its temporary name; one written in place is
// sealed at its last close, which follows the close asynchronously.
void stage_file(const FileCase& c, const Mount& mount, int n, const std::string& data) {
  write_file(mount.m(c.source(n)), data);
  if (c.in_place) {
    const std::string leaf = c.source(n).substr(2);
    EXPECT_TRUE(eventually([&] {
      return manifest_records(mount.b("c/.sealfs-manifest." + leaf), leaf, data);
    })) << "the temporary file was not sealed at its close";
  }
}

// Before the crash: the old file published at dst (when replacing), and the
// new one staged under its temporary name.
void prepare_file_case(const FileCase& c, const std::string& backing, const Versions& v) {
  Mount mount(MountConfig::with({c.options()}).backed_by(backing));
  ASSERT_TRUE(mount.ok()) << mount.error();
  if (c.replace) {
    stage_file(c, mount, 0, v.old_data);
    ASSERT_EQ(err_of(::rename(mount.m(c.source(0)).c_str(), mount.m(kFileDst).c_str())), 0);
    ASSERT_EQ(read_file(mount.m(kFileDst)), v.old_data);
  }
  stage_file(c, mount, 1, v.new_data);
}

// After the remount: the new file complete where the rename happened, else
// the old one (R6) or none, with the source as it was; nothing else visible.
void expect_old_or_new_file(const FileCase& c, const Mount& mount, const Versions& v) {
  // No power cut here: the rename happened exactly when its step was passed.
  const auto steps = file_publish_steps(c.replace);
  const bool renamed =
      std::find(steps.begin(), steps.end(), c.at) >= std::find(steps.begin(), steps.end(), step::kRenamed);
  const auto seen = read_file(mount.m(kFileDst));
  if (renamed) {
    EXPECT_EQ(seen, v.new_data) << "the new file, complete";
    EXPECT_EQ(lstat_errno(mount.m(c.source(1))), ENOENT);
  } else {
    if (c.replace) {
      EXPECT_EQ(seen, v.old_data) << "R6: the old file, never ENOENT";
    } else {
      EXPECT_EQ(seen, std::nullopt) << "absent";
      EXPECT_EQ(lstat_errno(mount.m(kFileDst)), ENOENT);
    }
    EXPECT_EQ(read_file(mount.m(c.source(1))), v.new_data) << "the source stays what it was";
  }
  // Nothing else is visible: no partial file, no stray sidecar or temporary.
  std::set<std::string> expected;
  if (seen) expected.insert("obj.o");
  if (!renamed && c.in_place) expected.insert("obj.o.tmp.1");
  EXPECT_EQ(visible_names(mount.m("c")), expected);
}

TEST_P(FileEntryCrash, RemountShowsOldOrNewFileAndTheNameIsReusable) {
  SEALFS_REQUIRE_FUSE();
  const FileCase& c = GetParam();
  const Versions v;
  TempDir dir("sealfs-crash-file");
  const std::string backing = dir / "B";
  make_dirs(backing + "/c");  // a container
  make_dirs(backing + "/tmp");
  prepare_file_case(c, backing, v);
  ASSERT_FALSE(HasFatalFailure());

  crash_daemon_at(backing, c.options(), c.at, [&](const Mount& mount) {
    EXPECT_NE(::rename(mount.m(c.source(1)).c_str(), mount.m(kFileDst).c_str()), 0)
        << "the rename should have been cut short";
  });
  ASSERT_FALSE(HasFatalFailure());

  Mount mount(MountConfig::with({c.options()}).backed_by(backing));
  ASSERT_TRUE(mount.ok()) << mount.error();
  expect_old_or_new_file(c, mount, v);

  // The next publish of the name works and reads back.
  stage_file(c, mount, 2, v.next_data);
  ASSERT_EQ(err_of(::rename(mount.m(c.source(2)).c_str(), mount.m(kFileDst).c_str())), 0);
  EXPECT_EQ(read_file(mount.m(kFileDst)), v.next_data);
  EXPECT_TRUE(manifest_records(mount.b("c/.sealfs-manifest.obj.o"), "obj.o", v.next_data));
  // A crash in a file publish never leaves anything that needs quarantine.
  EXPECT_EQ(quarantined_files(mount), std::vector<std::string>{});
}

INSTANTIATE_TEST_SUITE_P(Steps, FileEntryCrash, ::testing::ValuesIn(file_crashes()),
                         [](const auto& param_info) {
                           const FileCase& c = param_info.param;
                           return std::string(c.replace ? "Replace" : "Fresh") +
                                  (c.in_place ? "InPlace_" : "FromTmp_") + std::string(c.at);
                         });

// ------------------------------------------------------------ in-place seals

struct SealCase {
  bool in_entry;  // the file is inside a published directory entry, else a standalone file entry
  bool rewrite;   // the file is sealed already and rewritten, else new
  std::string_view at;
  bool journal = true;  // the crashed daemon's seal journal is left for the next (else removed first)

  std::string options() const { return in_entry ? "profile=tilelang" : "profile=generic"; }
  std::string target() const {
    if (in_entry) return rewrite ? "c/e/data.bin" : "c/e/extra.bin";
    return "c/f";
  }
};

// The steps of core/store/seal.cpp, in order.
constexpr std::string_view kSealSteps[] = {seal_steps::kDigested, seal_steps::kManifestWritten};

std::vector<SealCase> seal_crashes() {
  std::vector<SealCase> out;
  for (bool in_entry : {false, true}) {
    for (bool rewrite : {false, true}) {
      for (auto at : kSealSteps) out.push_back({in_entry, rewrite, at});
      out.push_back({in_entry, rewrite, seal_steps::kDigested, false});
    }
  }
  return out;
}

class SealCrash : public ::testing::TestWithParam<SealCase> {};

// The manifest (in B) that records the case's file.
std::string seal_manifest(const SealCase& c, const Mount& mount) {
  return c.in_entry ? mount.b("c/e/.sealfs-manifest") : mount.b("c/.sealfs-manifest.f");
}

// Publishes c/e (data.bin and other.bin) from tmp/<stage>; the rename's errno.
int publish_seal_entry(const Mount& mount, const std::string& stage, const Versions& v) {
  make_dirs(mount.m("tmp/" + stage));
  write_file(mount.m("tmp/" + stage + "/data.bin"), v.old_data);
  write_file(mount.m("tmp/" + stage + "/other.bin"), v.other_data);
  return err_of(::rename(mount.m("tmp/" + stage).c_str(), mount.m("c/e").c_str()));
}

// Before the crash: the entry published, or the standalone file sealed with
// its old bytes when it is rewritten.
void prepare_seal_case(const SealCase& c, const std::string& backing, const std::string& key,
                       const Versions& v) {
  Mount mount(MountConfig::with({c.options()}).backed_by(backing));
  ASSERT_TRUE(mount.ok()) << mount.error();
  if (c.in_entry) {
    ASSERT_EQ(publish_seal_entry(mount, "s1", v), 0);
  }
  if (!c.in_entry && c.rewrite) {
    write_file(mount.m(c.target()), v.old_data);
    ASSERT_TRUE(eventually([&] { return manifest_records(seal_manifest(c, mount), key, v.old_data); }));
  }
}

// The write whose seal the crash cuts short.
void write_in_place(const SealCase& c, const Mount& mount, const Versions& v) {
  // No O_TRUNC: a truncate of a sealed file by path re-seals at once, and
  // only the seal at the last close is under test here.
  const int fd = ::open(mount.m(c.target()).c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
  ASSERT_GE(fd, 0) << std::strerror(errno);
  EXPECT_EQ(::write(fd, v.new_data.data(), v.new_data.size()), static_cast<ssize_t>(v.new_data.size()));
  // Without OPEN the seal runs inside close (its FLUSH): the crash cuts it
  // short and close reports the lost connection; with OPEN it runs after.
  const int closed = ::close(fd);
  EXPECT_TRUE(closed == 0 || errno == ENOTCONN || errno == ECONNABORTED) << std::strerror(errno);
}

// After the remount: before the manifest is written the file holds new bytes
// under no record (new) or under the old one (rewrite): hidden. After:
// sealed, new. The entry around it, if any, is checked too.
void expect_old_or_new_seal(const SealCase& c, const Mount& mount, const std::string& key, const Versions& v,
                            bool sealed) {
  const auto seen = read_file(mount.m(c.target()));
  if (sealed) {
    EXPECT_EQ(seen, v.new_data);
  } else {
    EXPECT_EQ(seen, std::nullopt) << "a file whose seal was cut short is hidden";
    EXPECT_EQ(lstat_errno(mount.m(c.target())), ENOENT);
  }
  if (c.in_entry) {
    // An entry is invalid only when a file it lists changed: a listed file
    // rewritten in place and not re-sealed hides the whole entry (R2).
    const bool entry_visible = sealed || !c.rewrite;
    EXPECT_EQ(lstat_errno(mount.m("c/e")), entry_visible ? 0 : ENOENT);
    if (entry_visible) {
      EXPECT_EQ(read_file(mount.m("c/e/other.bin")), v.other_data);
      if (!c.rewrite) {
        EXPECT_EQ(read_file(mount.m("c/e/data.bin")), v.old_data);
      }
      std::set<std::string> expected = {"data.bin", "other.bin"};
      if (seen) expected.insert(key);
      EXPECT_EQ(visible_names(mount.m("c/e")), expected);
    }
  } else {
    EXPECT_EQ(visible_names(mount.m("c")), seen ? std::set<std::string>{"f"} : std::set<std::string>{});
  }
}

TEST_P(SealCrash, RemountShowsOldOrNewStateAndTheFileCanBeWrittenAgain) {
  SEALFS_REQUIRE_FUSE();
  const SealCase& c = GetParam();
  const Versions v;
  TempDir dir("sealfs-crash-seal");
  const std::string backing = dir / "B";
  make_dirs(backing + "/c");
  make_dirs(backing + "/tmp");
  const std::string key = c.target().substr(c.in_entry ? 4 : 2);  // name in the entry, or the file's name
  prepare_seal_case(c, backing, key, v);
  ASSERT_FALSE(HasFatalFailure());

  crash_daemon_at(backing, c.options(), c.at, [&](const Mount& mount) { write_in_place(c, mount, v); });
  ASSERT_FALSE(HasFatalFailure());

  if (!c.journal) {
    ASSERT_EQ(run_process({"sh", "-c", "rm -f " + backing + "/.sealfs/journal/*"}).status, 0);
  }
  Mount mount(MountConfig::with({c.options()}).backed_by(backing));
  ASSERT_TRUE(mount.ok()) << mount.error();
  // The writer's close returned before the seal began (with OPEN the seal
  // follows RELEASE), and it was journalled: a normal close outlives the
  // daemon (R4), so the next daemon finishes the seal wherever the crash cut
  // it, and the file shows with its new bytes (seal_journal_test.cpp).
  // Without the journal, a seal cut short leaves the file hidden.
  const bool sealed = c.journal || c.at == seal_steps::kManifestWritten;
  expect_old_or_new_seal(c, mount, key, v, sealed);

  // Written again through the mount: works, and is sealed at its close. A
  // hidden leftover is quarantined on the way (R2 or R5), never lost.
  const bool entry_hidden = c.in_entry && lstat_errno(mount.m("c/e")) == ENOENT;
  if (entry_hidden) {
    // The usual miss → rebuild → save: publish the entry again over the name.
    ASSERT_EQ(publish_seal_entry(mount, "s2", v), 0);
  }
  write_file(mount.m(c.target()), v.next_data);
  EXPECT_EQ(read_file(mount.m(c.target())), v.next_data);
  EXPECT_TRUE(eventually([&] { return manifest_records(seal_manifest(c, mount), key, v.next_data); }))
      << "not sealed at its close";
  EXPECT_EQ(read_file(mount.m(c.target())), v.next_data);
  if (!sealed) {
    EXPECT_TRUE(quarantine_holds(mount, v.new_data)) << "the unsealed bytes are not in quarantine";
  }
  if (c.in_entry) {
    EXPECT_EQ(read_file(mount.m("c/e/other.bin")), v.other_data);
  }
}

INSTANTIATE_TEST_SUITE_P(Steps, SealCrash, ::testing::ValuesIn(seal_crashes()), [](const auto& param_info) {
  const SealCase& c = param_info.param;
  return std::string(c.in_entry ? "InEntry" : "Standalone") + (c.rewrite ? "Rewrite_" : "New_") +
         std::string(c.at) + (c.journal ? "" : "_without_journal");
});

}  // namespace
}  // namespace sealfs::test
