#include "fs/cli/options.hpp"

#include <gtest/gtest.h>

namespace sealfs::cli {
namespace {

TEST(MountOptionsTest, SealfsOptionsAreParsed) {
  MountOptions o;
  ASSERT_TRUE(apply_option_list(
      "profile=tilelang,verify=always,durability=none,cache_timeout=2.5,cuda_validate=off", o));
  EXPECT_EQ(o.profile, "tilelang");
  EXPECT_EQ(o.verify, VerifyMode::always);
  EXPECT_EQ(o.durability, Durability::none);
  EXPECT_DOUBLE_EQ(o.cache_timeout, 2.5);
  EXPECT_EQ(o.cuda_validate, "off");
  EXPECT_TRUE(o.fuse_options.empty());
}

TEST(MountOptionsTest, KeyFileIsRecordedAndLoadedOnlyWhenSet) {
  MountOptions o;
  ASSERT_TRUE(load_keys(o).ok());
  EXPECT_EQ(*load_keys(o), nullptr);  // no key_file: nothing signed or checked
  ASSERT_TRUE(apply_option_list("profile=tilelang,key_file=/nonexistent/sealfs.keys", o));
  EXPECT_EQ(o.key_file, "/nonexistent/sealfs.keys");
  EXPECT_TRUE(o.fuse_options.empty());  // sealfs's own, never handed to libfuse
  auto keys = load_keys(o);
  ASSERT_FALSE(keys.ok());
  EXPECT_EQ(keys.code(), ENOENT);
  EXPECT_NE(keys.error().message.find("key file /nonexistent/sealfs.keys"), std::string::npos);
}

TEST(MountOptionsTest, UnknownOptionIsRefusedByName) {
  MountOptions o;
  auto s = apply_option_list("profile=generic,frobnicate", o);
  ASSERT_FALSE(s);
  EXPECT_EQ(s.code(), EINVAL);
  EXPECT_NE(s.error().message.find("frobnicate"), std::string::npos);
}

TEST(MountOptionsTest, BadValuesAreRefused) {
  for (const char* bad :
       {"verify=sometimes", "durability=maybe", "cache_timeout=-1", "cache_timeout=abc",
        "cache_timeout=", "cuda_validate=gpu", "profile=", "fsname=", "key_file=", "key_file"}) {
    MountOptions o;
    EXPECT_EQ(apply_option_list(bad, o).code(), EINVAL) << bad;
  }
}

TEST(MountOptionsTest, MetricsFileAndItsIntervalAreSealfsOwn) {
  MountOptions o;
  EXPECT_TRUE(o.metrics_file.empty());
  EXPECT_DOUBLE_EQ(o.metrics_interval, 5.0);
  ASSERT_TRUE(apply_option_list("metrics_file=/var/lib/node_exporter/sealfs.prom,metrics_interval=0.5", o));
  EXPECT_EQ(o.metrics_file, "/var/lib/node_exporter/sealfs.prom");
  EXPECT_DOUBLE_EQ(o.metrics_interval, 0.5);
  EXPECT_TRUE(o.fuse_options.empty());  // never handed to libfuse
  for (const char* bad : {"metrics_file=", "metrics_file", "metrics_interval=0", "metrics_interval=0.05",
                          "metrics_interval=soon", "metrics_interval="}) {
    MountOptions b;
    EXPECT_EQ(apply_option_list(bad, b).code(), EINVAL) << bad;
  }
}

TEST(MountOptionsTest, MountFuse3NoiseIsAcceptedAndFuseOptionsPassThrough) {
  // What mount.fuse3 hands over for an fstab line "B M fuse.sealfs profile=tilelang,nofail 0 0".
  MountOptions o;
  ASSERT_TRUE(
      apply_option_list("rw,nosuid,nodev,relatime,nofail,_netdev,x-systemd.automount,profile=tilelang", o));
  EXPECT_EQ(o.profile, "tilelang");
  // relatime asks for B's rule, which M's access times follow: accepted, not passed on.
  EXPECT_EQ(o.fuse_options, (std::vector<std::string>{"rw", "nosuid", "nodev"}));
}

TEST(MountOptionsTest, DevAndSuidAsMountFuse3AddsThemAreOverriddenWithANote) {
  // mount.fuse3 appends "dev,suid" to every root mount without nodev/nosuid.
  MountOptions o;
  o.backing = "/b";
  ASSERT_TRUE(apply_option_list("rw,dev,suid", o));
  EXPECT_EQ(o.fuse_options, (std::vector<std::string>{"rw"}));
  EXPECT_EQ(o.notes.size(), 2u);
  const std::string s = fuse_option_string(o);
  EXPECT_EQ(s.find(",dev"), std::string::npos) << s;
  EXPECT_EQ(s.find(",suid"), std::string::npos) << s;
  EXPECT_TRUE(s.ends_with(",nodev,nosuid")) << s << ": last, so nothing before turns them off (R10)";
}

TEST(MountOptionsTest, NoatimeIsHonouredAndPassedOn) {
  MountOptions o;
  EXPECT_FALSE(o.noatime);
  ASSERT_TRUE(apply_option_list("noatime", o));
  EXPECT_TRUE(o.noatime);
  EXPECT_EQ(o.fuse_options, (std::vector<std::string>{"noatime"}));
  ASSERT_TRUE(apply_option_list("atime", o));
  EXPECT_FALSE(o.noatime) << "the last one wins, as in mount(8)";
  // atime is the kernel's default and libfuse 3.17 refuses it: it only takes
  // the noatime back (CI's passthrough stage: "fuse: unknown option(s): `-o atime'").
  EXPECT_EQ(o.fuse_options, std::vector<std::string>{});
  ASSERT_TRUE(apply_option_list("noatime,noatime", o));
  EXPECT_EQ(o.fuse_options, (std::vector<std::string>{"noatime"}));
}

TEST(MountOptionsTest, EveryOtherAtimeRuleIsAcceptedAsBsAndNotPassedOn) {
  // Every rule libfuse (3.17's mount_flags) and mount(8) know. The kernel
  // never moves a FUSE inode's atime itself: each is B's rule to give, and
  // libfuse before 3.17 would refuse all of them.
  for (const char* rule : {"relatime", "norelatime", "strictatime", "nostrictatime", "diratime", "nodiratime",
                           "lazytime", "nolazytime"}) {
    MountOptions o;
    EXPECT_TRUE(apply_option_list(rule, o)) << rule;
    EXPECT_TRUE(o.fuse_options.empty()) << rule << " reached libfuse";
    EXPECT_FALSE(o.noatime) << rule;
    EXPECT_TRUE(o.notes.empty()) << rule;
  }
  // As xfstests' generic/003 cycles its mounts.
  MountOptions o;
  ASSERT_TRUE(apply_option_list("rw,nodiratime,strictatime,dev,suid", o));
  EXPECT_EQ(o.fuse_options, (std::vector<std::string>{"rw"}));
  EXPECT_EQ(apply_option_list("nodiratime=1", o).code(), EINVAL) << "a flag takes no value";
}

TEST(MountOptionsTest, NoOpenAndReadOnlyAreRecorded) {
  MountOptions o;
  EXPECT_FALSE(o.no_open) << "OPEN and RELEASE by default: a writer's last close is exact";
  EXPECT_FALSE(o.read_only);
  ASSERT_TRUE(apply_option_list("no_open", o));
  EXPECT_TRUE(o.no_open);
  ASSERT_TRUE(apply_option_list("keep_open", o));
  EXPECT_FALSE(o.no_open);
  EXPECT_TRUE(o.keep_open) << "given: a read-only mount keeps OPEN too";
  EXPECT_EQ(fuse_option_string(o).find("keep_open"), std::string::npos);
  ASSERT_TRUE(apply_option_list("no_open,ro", o));
  EXPECT_TRUE(o.no_open);
  EXPECT_TRUE(o.read_only);
  // ro still reaches libfuse (the superblock is mounted read-only); no_open is sealfs's own.
  EXPECT_EQ(o.fuse_options, (std::vector<std::string>{"ro"}));
  EXPECT_EQ(fuse_option_string(o).find("no_open"), std::string::npos);
  ASSERT_TRUE(apply_option_list("rw", o));
  EXPECT_FALSE(o.read_only);
  EXPECT_FALSE(apply_option_list("no_open=1", o)) << "a flag takes no value";
  EXPECT_FALSE(apply_option_list("keep_open=yes", o)) << "a flag takes no value";
}

TEST(MountOptionsTest, NoOpendirIsTheDefaultAndKeepOpendirTurnsItOff) {
  MountOptions o;
  EXPECT_TRUE(o.no_opendir);
  ASSERT_TRUE(apply_option_list("keep_opendir", o));
  EXPECT_FALSE(o.no_opendir);
  ASSERT_TRUE(apply_option_list("no_opendir", o));
  EXPECT_TRUE(o.no_opendir);
  EXPECT_EQ(fuse_option_string(o).find("opendir"), std::string::npos) << "sealfs's own, not libfuse's";
  EXPECT_FALSE(apply_option_list("keep_opendir=1", o)) << "a flag takes no value";
}

TEST(MountOptionsTest, PassthroughIsTheDefaultAndNoPassthroughTurnsItOff) {
  MountOptions o;
  EXPECT_TRUE(o.no_passthrough) << "FUSE passthrough only when asked for (R2 for held descriptors)";
  ASSERT_TRUE(apply_option_list("passthrough", o));
  EXPECT_FALSE(o.no_passthrough);
  ASSERT_TRUE(apply_option_list("no_passthrough", o));
  EXPECT_TRUE(o.no_passthrough);
  EXPECT_EQ(fuse_option_string(o).find("passthrough"), std::string::npos) << "sealfs's own, not libfuse's";
  EXPECT_FALSE(apply_option_list("no_passthrough=1", o)) << "a flag takes no value";
}

TEST(MountOptionsTest, PushMaxTakesAByteCount) {
  MountOptions o;
  EXPECT_EQ(o.push_max, 64U << 20);
  ASSERT_TRUE(apply_option_list("push_max=0", o));
  EXPECT_EQ(o.push_max, 0U);
  ASSERT_TRUE(apply_option_list("push_max=1048576", o));
  EXPECT_EQ(o.push_max, 1048576U);
  EXPECT_FALSE(apply_option_list("push_max=lots", o));
  EXPECT_FALSE(apply_option_list("push_max", o)) << "a count needs a value";
  EXPECT_EQ(fuse_option_string(o).find("push_max"), std::string::npos) << "sealfs's own, not libfuse's";
}

TEST(MountOptionsTest, ConnectionOptionsAreKeptApartFromMountOptions) {
  // libfuse's session refuses these; they are applied to the connection in init.
  MountOptions o;
  ASSERT_TRUE(apply_option_list("max_write=131072,async_read,max_read=65536,no_remote_lock", o));
  EXPECT_EQ(o.conn_options, (std::vector<std::string>{"max_write=131072", "async_read", "no_remote_lock"}));
  EXPECT_EQ(o.max_read, 65536u);
  EXPECT_EQ(o.fuse_options, (std::vector<std::string>{"max_read=65536"}));
  for (const char* bad : {"max_write=", "max_write=big", "max_background=-1", "max_readahead=1k",
                          "max_read=x", "readdirplus=maybe"}) {
    MountOptions b;
    EXPECT_EQ(apply_option_list(bad, b).code(), EINVAL) << bad;
  }
}

TEST(MountOptionsTest, AllowOtherAlwaysComesWithDefaultPermissions) {
  MountOptions o;
  o.backing = "/b";
  ASSERT_TRUE(apply_option_list("allow_other", o));
  EXPECT_TRUE(o.allow_other);
  const std::string s = fuse_option_string(o);
  EXPECT_NE(s.find("allow_other"), std::string::npos);
  EXPECT_NE(s.find("default_permissions"), std::string::npos);
  EXPECT_NE(s.find("fsname=/b"), std::string::npos);
  EXPECT_NE(s.find("subtype=sealfs"), std::string::npos);
}

TEST(MountOptionsTest, FsnameIsEscapedAndNotDuplicated) {
  MountOptions o;
  o.backing = "/a,b";
  EXPECT_NE(fuse_option_string(o).find("fsname=/a\\,b"), std::string::npos);
  ASSERT_TRUE(apply_option_list("fsname=cache,default_permissions", o));
  const std::string s = fuse_option_string(o);
  EXPECT_EQ(s.find("fsname=/a"), std::string::npos);
  EXPECT_EQ(s.find("default_permissions"), s.rfind("default_permissions"));
}

TEST(MountOptionsTest, DebugOptionSetsDebugWithoutPassingIt) {
  MountOptions o;
  ASSERT_TRUE(apply_option_list("debug", o));
  EXPECT_TRUE(o.debug);
  EXPECT_TRUE(o.fuse_options.empty());
}

}  // namespace
}  // namespace sealfs::cli
