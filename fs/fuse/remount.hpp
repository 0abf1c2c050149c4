// Remount (issue 27 point 3): the kernel flips a FUSE superblock between ro
// and rw itself and sends the daemon no request for it; `sealfs -o remount`
// (fs/cli/remount.cpp, what mount(8) runs through mount.fuse3) tells the
// daemon through this extended attribute of the mount's root, which the
// adapter answers itself (xattr_ops.cpp), root only:
//   getxattr: "rw", "ro" (remounted read-only) or "ro-mount" (mounted -o ro,
//             which cannot become read-write: the kernel was told for good
//             that no FLUSH is wanted);
//   setxattr "ro": the superblock is about to go read-only: every seal still
//             waiting (DeferredSeals) runs now, before the reply;
//   setxattr "rw": it went read-write again (EROFS on a -o ro mount).
// "user.sealfs*" is the store's reserved prefix, so B never holds it.
#pragma once

namespace sealfs::fuse {

inline constexpr const char* kRemountXattr = "user.sealfs.remount";

}  // namespace sealfs::fuse
