#!/bin/sh
# `mount -o remount,ro M` and `mount -o remount,rw M` on a sealfs mount
# (issue 27 point 3; xfstests generic/294, 306, 452), through mount(8) and
# mount.fuse3 as a user types them: mount(8) finds `sealfs` in its fixed
# PATH (here /usr/local/sbin, a tmpfs of this namespace with a link to the
# built binary), mount.fuse3 runs `sealfs B M -o ro,…,remount,…`.
#  1. remount,ro of a read-write mount: the superblock goes read-only (both
#     mountinfo flags), nosuid,nodev are kept, writes fail EROFS, reads work;
#     the daemon was told before the flip: a large file closed a moment
#     before (its seal waits 500 ms, fs/fuse/deferred_seals.hpp) is sealed
#     once the remount returns, and the daemon says "ro";
#  2. remount,rw: writable again, the daemon says "rw", and a file written
#     then is published;
#  3. remount,ro while a file is open for writing: refused in one line that
#     says what to do, the mount stays read-write;
#  4. an unknown option in a remount: refused in one line, nothing changed;
#  5. a mount made with -o ro: remount,rw is refused in one line that says to
#     mount again without ro; remount,ro of it succeeds and changes nothing.
# Runs in a private mount namespace; needs root, /dev/fuse, mount.fuse3 and
# unshare -m, else skipped (77), and under CI=true failed instead.
# usage: remount_test.sh SEALFS_BINARY
set -u
if [ "${SEALFS_IN_NAMESPACE:-}" != 1 ]; then
  if [ "$(id -u)" != 0 ] || [ ! -c /dev/fuse ] || ! command -v mount.fuse3 >/dev/null ||
     ! unshare -m true 2>/dev/null; then
    if [ "${CI:-}" = true ]; then
      echo "FAIL: CI must run this test, but it needs root, /dev/fuse, mount.fuse3 and unshare -m"
      exit 1
    fi
    echo "skipped: needs root, /dev/fuse, mount.fuse3 and unshare -m (CAP_SYS_ADMIN)"
    exit 77
  fi
  SEALFS_IN_NAMESPACE=1 exec unshare -m sh "$0" "$@"
fi

sealfs=$(realpath "$1")
mount --make-rprivate /
sh "$(dirname "$0")/../support/detach_fuse_copies.sh"  # other tests' FUSE mounts, copied here
work=$(mktemp -d)
b="$work/backing" m="$work/view"
mkdir -p "$b" "$m"
failures=0
check() {  # check NAME EXPECTED ACTUAL
  if [ "$2" = "$3" ]; then echo "ok   $1"; else echo "FAIL $1: expected [$2], got [$3]"; failures=$((failures + 1)); fi
}
ours() { grep " fuse.sealfs " /proc/self/mountinfo | grep " $m "; }
# The mount's own flags (mountinfo's 6th field) and the superblock's (the last).
mount_flags() { ours | awk '{ print $6 }'; }
super_rw() { ours | awk '{ split($NF, o, ","); print o[1] }'; }
daemon_says() { python3 -c 'import os, sys; print(os.getxattr(sys.argv[1], "user.sealfs.remount").decode())' "$m"; }
cleanup() {
  exec 3>&- 2>/dev/null
  while [ -n "$(ours)" ]; do umount -l "$m" 2>/dev/null || break; done
  umount /usr/local/sbin 2>/dev/null
  rm -rf "$work"
}
trap cleanup EXIT
mount -t tmpfs -o mode=0755 tmpfs /usr/local/sbin && ln -s "$sealfs" /usr/local/sbin/sealfs || {
  echo "FAIL: cannot put sealfs into mount(8)'s PATH"; exit 1; }

"$sealfs" -f -o durability=none "$b" "$m" & daemon=$!
for _ in $(seq 100); do [ -n "$(ours)" ] && break; sleep 0.1; done
check "mounted read-write" "rw,nosuid,nodev,relatime" "$(mount_flags)"
echo first > "$m/first.tmp" && mv "$m/first.tmp" "$m/first"
check "published before the remount" first "$(cat "$m/first")"

# 1. remount,ro
head -c 9437184 /dev/zero > "$m/big"   # 9 MiB: sealed 500 ms after its close
out=$(mount -o remount,ro "$m" 2>&1); check "mount -o remount,ro exits 0" "0:" "$?:$out"
check "the mount is read-only, nosuid,nodev kept" "ro,nosuid,nodev,relatime" "$(mount_flags)"
check "the superblock is read-only" ro "$(super_rw)"
[ -f "$b/.sealfs-manifest.big" ]; check "the file closed before the remount is sealed when it returns" 0 $?
check "the daemon knows it is read-only" ro "$(daemon_says)"
out=$(touch "$m/new" 2>&1); check "a write is refused" "Read-only file system" "$(echo "$out" | grep -o 'Read-only file system')"
check "reads still work" first "$(cat "$m/first")"
check "the sealed file reads back" 9437184 "$(wc -c <"$m/big")"

# 2. remount,rw
out=$(mount -o remount,rw "$m" 2>&1); check "mount -o remount,rw exits 0" "0:" "$?:$out"
check "the mount is read-write again" "rw,nosuid,nodev,relatime" "$(mount_flags)"
check "the superblock is read-write again" rw "$(super_rw)"
check "the daemon knows it is read-write" rw "$(daemon_says)"
echo second > "$m/second.tmp" && mv "$m/second.tmp" "$m/second"
check "a publish after remount,rw" second "$(cat "$m/second")"
[ -f "$b/.sealfs-manifest.second" ]; check "it wrote its manifest" 0 $?

# 3. a file open for writing
exec 3>"$m/open-file"
out=$(mount -o remount,ro "$m" 2>&1); rc=$?
check "remount,ro with a writer fails" 1 "$rc"
check "in one line" 1 "$(echo "$out" | wc -l)"
echo "$out" | grep -q "open for writing.*close it and retry"; check "that says what to do ($out)" 0 $?
check "the mount stays read-write" rw "$(super_rw)"
check "the daemon still says read-write" rw "$(daemon_says)"
exec 3>&-

# 4. an unknown option
out=$(mount -o remount,ro,bogus "$m" 2>&1); rc=$?
check "remount with an unknown option fails" "1:sealfs: remount: unknown option 'bogus'" "$rc:$out"
check "and changes nothing" rw "$(super_rw)"

umount "$m"; wait "$daemon"; check "the daemon exits 0 at the unmount" 0 $?

# 5. a mount made with -o ro
"$sealfs" -f -o ro,durability=none "$b" "$m" & daemon=$!
for _ in $(seq 100); do [ -n "$(ours)" ] && break; sleep 0.1; done
check "the daemon of a -o ro mount says so" ro-mount "$(daemon_says)"
out=$(mount -o remount,rw "$m" 2>&1); rc=$?
check "remount,rw of a -o ro mount fails" 1 "$rc"
check "in one line" 1 "$(echo "$out" | wc -l)"
echo "$out" | grep -q "mount it again without ro"; check "that says to mount again without ro ($out)" 0 $?
check "it stays read-only" ro "$(super_rw)"
out=$(mount -o remount,ro "$m" 2>&1); check "remount,ro of a read-only mount exits 0" "0:" "$?:$out"
check "still read-only" "ro,nosuid,nodev,relatime" "$(mount_flags)"
check "reads work" second "$(cat "$m/second")"
umount "$m"; wait "$daemon"; check "the daemon exits 0 at the unmount" 0 $?

[ "$failures" = 0 ] || { echo "$failures check(s) failed"; exit 1; }
echo "all remount checks passed"
