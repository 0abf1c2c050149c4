// Records (core/store/records.hpp), asked directly: the record of a file as
// it is (size and digest, the profile's validators run on request), and the
// read-modify-write of a manifest under its stripe lock.
#include "core/store/records.hpp"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <string>

#include "core/base/digest.hpp"
#include "core/base/result.hpp"
#include "core/layout/names.hpp"
#include "core/manifest/manifest.hpp"
#include "core/manifest/manifest_file.hpp"
#include "core/store/impl.hpp"
#include "tests/support/store_parts.hpp"
#include "tests/support/temp_dir.hpp"

namespace sealfs::test {
namespace {

class RecordsTest : public StorePartsTest {
 protected:
  const Records& records() { return parts().records; }
  Status edit(const std::string& rel, bool create, const std::function<Status(Manifest&)>& change) {
    At d = at(rel);
    return records().edit_manifest(d.dir.get(), d.ctx.st, kDirManifest, rel, change, create);
  }
  // The record of c/<name> as a seal there makes it.
  Result<FileRecord> record_in_c(const std::string& name, bool validate, Manifest* extras = nullptr) {
    At c = at("c");
    RecordOptions how;
    how.profile_rel = "c/" + name;
    how.key = name;
    how.validate = validate;
    return records().make_record(c.dir.get(), name, how, extras);
  }
};

TEST_F(RecordsTest, AFilesRecordIsItsSizeAndDigestAsItIsNow) {
  make_dirs(B("c"));
  write_file(B("c/k.bin"), "kernel bytes");
  auto rec = record_in_c("k.bin", /*validate=*/false);
  ASSERT_TRUE(rec.ok()) << rec.error().message;
  EXPECT_EQ(rec->size, 12u);
  ASSERT_TRUE(rec->sha256.has_value());
  EXPECT_EQ(*rec->sha256, sha256_of("kernel bytes"));
  EXPECT_FALSE(rec->symlink.has_value());
}

TEST_F(RecordsTest, AFileTheProfilesValidatorRejectsHasNoRecord) {
  make_dirs(B("c"));
  write_file(B("c/bad.bin"), "SEALFS-TEST-REJECT and more");
  Manifest extras;
  auto rec = record_in_c("bad.bin", /*validate=*/true, &extras);
  ASSERT_FALSE(rec.ok());
  EXPECT_EQ(rec.code(), EBADMSG);
  // Not asked to validate: recorded as it is.
  EXPECT_TRUE(record_in_c("bad.bin", /*validate=*/false).ok());
}

TEST_F(RecordsTest, AManifestIsEditedInPlaceAndAMissingOneOnlyWhenAskedToCreate) {
  make_dirs(B("c/e"));
  auto add = [](std::string key, std::uint64_t size) {
    return [key, size](Manifest& m) -> Status {
      m.files[key] = FileRecord{size, std::nullopt, std::nullopt};
      return {};
    };
  };
  Status missing = edit("c/e", /*create=*/false, add("x", 1));
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.code(), ENOENT);
  EXPECT_FALSE(exists_nofollow(B("c/e/.sealfs-manifest")));

  ASSERT_TRUE(edit("c/e", /*create=*/true, add("x", 1)).ok());
  ASSERT_TRUE(edit("c/e", /*create=*/false, add("y", 2)).ok());
  UniqueFd e = dir("c/e");
  auto read = read_manifest_at(e.get(), kDirManifest);
  ASSERT_TRUE(read.ok()) << read.error().message;
  ASSERT_EQ(read->manifest.files.size(), 2u);
  EXPECT_EQ(read->manifest.files.at("x").size, 1u);
  EXPECT_EQ(read->manifest.files.at("y").size, 2u);
}

TEST_F(RecordsTest, AnEditThatFailsLeavesTheManifestAsItWas) {
  make_dirs(B("c/e"));
  ASSERT_TRUE(edit("c/e", true, [](Manifest& m) -> Status {
                m.files["x"] = FileRecord{1, std::nullopt, std::nullopt};
                return {};
              }).ok());
  const std::string before = slurp(B("c/e/.sealfs-manifest"));
  Status refused = edit("c/e", false, [](Manifest& m) -> Status {
    m.files.clear();
    return make_error(EPERM, "refused");
  });
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.code(), EPERM);
  EXPECT_EQ(slurp(B("c/e/.sealfs-manifest")), before);
}

}  // namespace
}  // namespace sealfs::test
