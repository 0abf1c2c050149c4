// Store: extended attributes as the mount shows them (core/store/attributes.cpp):
// reserved names, POSIX ACL names unsupported, absent security labels.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/xattr.h>

#include <cerrno>
#include <string>

#include "tests/support/store_fixture.hpp"

namespace sealfs::test {
namespace {

constexpr const char* kAclNames[] = {"system.posix_acl_access", "system.posix_acl_default"};

TEST_F(StoreTest, PosixAclNamesAreUnsupportedOnTheMount) {
  UniqueFd root = dir("");
  for (const char* name : kAclNames) {
    EXPECT_EQ(store().get_xattr(root.get(), name, 0).code(), EOPNOTSUPP) << name;
    EXPECT_EQ(store().get_xattr(root.get(), name, 64).code(), EOPNOTSUPP) << name;
    EXPECT_EQ(store().set_xattr(root.get(), name, std::string(28, '\2'), 0).code(), EOPNOTSUPP) << name;
    EXPECT_EQ(store().remove_xattr(root.get(), name).code(), EOPNOTSUPP) << name;
  }
  // Nothing was written to B on the way.
  char buf[64];
  EXPECT_LT(::getxattr(B().c_str(), kAclNames[0], buf, sizeof buf), 0);
}

TEST_F(StoreTest, AnAbsentSecurityLabelIsUnsupportedAndOtherNamesPassThrough) {
  UniqueFd root = dir("");
  EXPECT_EQ(store().get_xattr(root.get(), "security.selinux", 0).code(), EOPNOTSUPP);
  EXPECT_EQ(store().get_xattr(root.get(), "security.selinux", 256).code(), EOPNOTSUPP);
  // An absent name of any other kind is still ENODATA, as on B.
  EXPECT_EQ(store().get_xattr(root.get(), "user.absent", 0).code(), ENODATA);
  ASSERT_TRUE(store().set_xattr(root.get(), "user.note", "hi", 0).ok());
  auto got = store().get_xattr(root.get(), "user.note", 16);
  ASSERT_TRUE(got.ok()) << got.error().message;
  EXPECT_EQ(got->value, "hi");
  auto names = store().list_xattrs(root.get());
  ASSERT_TRUE(names.ok());
  EXPECT_NE(names->find("user.note"), std::string::npos);
  EXPECT_EQ(names->find("posix_acl"), std::string::npos);
}

}  // namespace
}  // namespace sealfs::test
