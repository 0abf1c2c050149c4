#!/bin/sh
# The Debian package as a user gets it:
#  1. builds it (cmake --workflow --preset package) and checks the shipped
#     binary with readelf: PIE, RELRO, BIND_NOW, stack protector, fortified
#     calls, stripped; the changelog's version is the package's;
#  2. lintian --pedantic (info and experimental tags shown): no tag at all;
#  3. a clean `mmdebstrap --variant=minbase bookworm` chroot (a tarball cached
#     under build/, made again after a week): apt installs the .deb and pulls
#     only packages of its Depends closure, none of them -dev or a build tool;
#  4. in it, with /dev, /proc and /sys bound in: the installed sealfs mounts,
#     a file published by rename gets its manifest in the backing directory
#     and reads back, fusermount3 -u unmounts and the daemon exits 0;
#  5. `man sealfs` and `man sealfs-mountctl` render without a warning
#     (man-db is installed for this check only, after the dependency check);
#  6. purge: dpkg knows nothing of sealfs, none of its files is left unless
#     another package owns it, /etc/sealfs is gone, and autoremove brings the
#     chroot back to its first package set.
# Runs in a private mount namespace, so the binds die with it whatever
# happens; the EXIT trap unmounts them too and removes the chroot only once
# nothing is mounted in it. Needs root, /dev/fuse, unshare -m, lintian,
# mmdebstrap, readelf and the Debian mirror: skipped (77) without them, and
# failed instead under CI=true.
# usage: deb_package_test.sh SOURCE_DIR
set -u
src=$(realpath "$1")
mirror=${SEALFS_DEBIAN_MIRROR:-http://deb.debian.org}

skip_or_fail() {  # skip_or_fail REASON
  if [ "${CI:-}" = true ]; then echo "FAIL: CI must run this test: $1"; exit 1; fi
  echo "skipped: $1"; exit 77
}
fail() { echo "FAIL: $*"; exit 1; }
now() { date +%s; }
t0=$(now)
phase() { echo "== [$(($(now) - t0)) s] $*"; }

if [ "${SEALFS_IN_NAMESPACE:-}" != 1 ]; then
  [ "$(id -u)" = 0 ] && [ -c /dev/fuse ] && unshare -m true 2>/dev/null ||
    skip_or_fail "needs root, /dev/fuse and unshare -m"
  for tool in lintian mmdebstrap dpkg-deb dpkg-parsechangelog readelf; do
    command -v "$tool" >/dev/null || skip_or_fail "needs $tool (.ci/install-deps installs it)"
  done
  SEALFS_IN_NAMESPACE=1 exec unshare -m sh "$0" "$@"
fi
mount --make-rprivate /
sh "$(dirname "$0")/../../tests/support/detach_fuse_copies.sh"  # other tests' FUSE mounts, copied here

. "$src/packaging/tests/chroot_base.sh"
start_base_chroot new

# ---- 1. build ------------------------------------------------------------------
phase "cmake --workflow --preset package"
rm -f "$src"/build/package/sealfs_*.deb
(cd "$src" && cmake --workflow --preset package) >"$work/build.log" 2>&1 || {
  tail -40 "$work/build.log"; fail "the package did not build"; }
set -- "$src"/build/package/sealfs_*.deb
[ $# = 1 ] && [ -f "$1" ] || fail "expected one sealfs_*.deb in build/package, found: $*"
deb=$1
dpkg-deb -I "$deb" control | sed 's/^/   /'
version=$(dpkg-deb -f "$deb" Version)
changelog_version=$(dpkg-parsechangelog -l "$src/packaging/debian/changelog" -S Version)
[ "$version" = "$changelog_version" ] ||
  fail "package version $version, but packaging/debian/changelog's latest entry is $changelog_version"

mkdir "$work/unpacked"
dpkg-deb -x "$deb" "$work/unpacked"
bin="$work/unpacked/usr/bin/sealfs"
[ -x "$bin" ] || fail "no /usr/bin/sealfs in the package"
# The same check as the container image's binary (container_test.sh).
sh "$src/packaging/tests/hardening_check.sh" "$bin" "the package's /usr/bin/sealfs" || exit 1

# ---- 2. lintian ------------------------------------------------------------------
phase "lintian --pedantic"
lintian --pedantic --display-info --display-experimental --fail-on none "$deb" >"$work/lintian.out" 2>&1 || {
  cat "$work/lintian.out"; fail "lintian did not run"; }
sed 's/^/   /' "$work/lintian.out"
tags=$(grep -E '^[EWIPXO]: ' "$work/lintian.out")
[ -z "$tags" ] || fail "lintian tags: $tags"
echo "ok   lintian --pedantic: no tag"

# ---- 3. a clean chroot, the package installed by apt ----------------------------
if [ -n "$chroot_base_pid" ]; then
  phase "waiting for mmdebstrap"
  wait "$chroot_base_pid"; status=$?; chroot_base_pid=
  [ "$status" = 0 ] || { tail -20 "$work/mmdebstrap.log"; skip_or_fail "mmdebstrap failed (Debian mirror $mirror unreachable?)"; }
  mv "$cache/new.tar" "$base"
fi
tar -C "$root" -xf "$base"
cp /etc/resolv.conf "$root/etc/resolv.conf"
cp "$deb" "$root/tmp/sealfs.deb"
mount --bind /dev "$root/dev"
mount --bind /proc "$root/proc"
mount --bind /sys "$root/sys"
in_root() { chroot "$root" env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin DEBIAN_FRONTEND=noninteractive LC_ALL=C.UTF-8 "$@"; }
package_set() { in_root dpkg-query -W -f '${db:Status-Abbrev} ${Package}\n' | sort; }

phase "apt-get install ./sealfs.deb in the chroot"
in_root apt-get -q update >"$work/apt.log" 2>&1 || { tail -20 "$work/apt.log"; skip_or_fail "apt-get update failed (mirror $mirror)"; }
package_set >"$work/first.set"
awk '{ print $2 }' "$work/first.set" >"$work/first.names"
# The closure apt may pick from: every package the Depends (and Pre-Depends)
# reach, through every alternative and provider; no Recommends.
depends=$(dpkg-deb -f "$deb" Pre-Depends Depends | sed -n 's/^[A-Za-z-]*: //p' | tr ',|' '\n\n' |
  sed 's/(.*)//; s/\[.*\]//; s/:any//; s/ //g' | sed '/^$/d' | sort -u)
(echo sealfs; in_root apt-cache depends --recurse --no-recommends --no-suggests --no-conflicts \
  --no-breaks --no-replaces --no-enhances $depends | grep -v '^ ' | tr -d '<>') | sort -u >"$work/closure"
[ "$(wc -l <"$work/closure")" -gt 5 ] || fail "apt-cache depends found no closure for: $(echo $depends)"
in_root apt-get install -y -q --no-install-recommends /tmp/sealfs.deb >>"$work/apt.log" 2>&1 || {
  tail -30 "$work/apt.log"; fail "apt-get install of the package failed"; }
pulled=$(package_set | awk '{ print $2 }' | grep -vxF -f "$work/first.names")
echo "   pulled: $(echo $pulled)"
echo "$pulled" | grep -qx sealfs || fail "sealfs is not installed"
outside=$(echo "$pulled" | grep -vxF -f "$work/closure")
[ -z "$outside" ] || fail "apt pulled packages outside the Depends closure: $(echo $outside)"
tools=$(echo "$pulled" | grep -E -- '-dev$|^(gcc|g\+\+|cpp|clang|make|cmake|binutils|pkgconf|pkg-config|dpkg-dev|build-essential|ninja-build)(-|$)')
[ -z "$tools" ] || fail "apt pulled development packages or build tools: $(echo $tools)"
for dep in $(dpkg-deb -f "$deb" Depends | tr ',' '\n' | sed 's/|.*//; s/(.*)//; s/ //g'); do
  in_root dpkg-query -W -f '${db:Status-Abbrev}' "$dep" 2>/dev/null | grep -q '^ii' ||
    fail "dependency $dep is not installed"
done
echo "ok   installed; apt pulled only the Depends closure ($(echo "$pulled" | wc -l) packages)"
installed_version=$(in_root sealfs --version) || fail "sealfs --version failed: $installed_version"
[ "$(echo "$installed_version" | sed -n 1p)" = "sealfs $version" ] ||
  fail "the installed sealfs --version says '$(echo "$installed_version" | sed -n 1p)', the package is $version"
echo "ok   sealfs --version of the installed binary: $(echo $installed_version)"

# ---- 4. a mount in the chroot --------------------------------------------------
phase "a sealfs mount in the chroot"
files=$(in_root dpkg-query -L sealfs)
mkdir -p "$root/srv/backing" "$root/srv/view"
# Not through in_root: $! must be the daemon itself, for wait and cleanup.
chroot "$root" env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin sealfs -f -o profile=generic /srv/backing /srv/view &
daemon_pid=$!
in_root /usr/libexec/sealfs/sealfs-mountctl wait /srv/view 30 || fail "the mount did not come up"
in_root sh -c 'printf "sealed payload\n" > /srv/view/obj.tmp && mv /srv/view/obj.tmp /srv/view/obj.bin' ||
  fail "publish by rename failed"
[ "$(in_root cat /srv/view/obj.bin)" = "sealed payload" ] || fail "the published file does not read back"
[ -f "$root/srv/backing/.sealfs-manifest.obj.bin" ] || fail "the rename wrote no manifest in the backing directory"
[ "$(in_root ls -A /srv/view)" = obj.bin ] || fail "the view shows more than the published file: $(in_root ls -A /srv/view)"
in_root sealfs status /srv/view >/dev/null || fail "sealfs status through the mount failed"
in_root fusermount3 -u /srv/view || fail "fusermount3 -u failed"
wait "$daemon_pid"; status=$?; daemon_pid=
[ "$status" = 0 ] || fail "the daemon exited $status after the unmount"
grep -q " $root/srv/view " /proc/self/mountinfo && fail "the mount is still there after fusermount3 -u"
echo "ok   mounted, published by rename (manifest written), read back, unmounted, daemon exited 0"

# ---- 5. man pages (adds man-db and its dependencies, for this check only) ----------
phase "man sealfs (installing man-db)"
package_set >"$work/sealfs.set"
in_root apt-get install -y -q --no-install-recommends man-db >>"$work/apt.log" 2>&1 || {
  tail -20 "$work/apt.log"; fail "apt-get install man-db failed"; }
for page in sealfs sealfs-mountctl; do
  out=$(in_root env MANWIDTH=80 man -P cat 8 "$page" 2>"$work/man.err") || fail "man $page failed: $(cat "$work/man.err")"
  [ ! -s "$work/man.err" ] || fail "man $page warned: $(cat "$work/man.err")"
  echo "$out" | grep -q "^NAME" && echo "$out" | grep -Eq "^ +$page +- " ||
    fail "man $page: no NAME section in: $(echo "$out" | head -5)"
  echo "ok   man $page renders ($(echo "$out" | wc -l) lines)"
done

# ---- 6. purge ------------------------------------------------------------------------
phase "apt-get purge sealfs man-db; autoremove --purge"
in_root apt-get purge -y -q sealfs man-db >>"$work/apt.log" 2>&1 || { tail -20 "$work/apt.log"; fail "purge failed"; }
in_root apt-get autoremove --purge -y -q >>"$work/apt.log" 2>&1 || { tail -20 "$work/apt.log"; fail "autoremove failed"; }
in_root dpkg-query -W sealfs >/dev/null 2>&1 && fail "dpkg still knows sealfs: $(in_root dpkg-query -W -f '${db:Status-Abbrev}' sealfs)"
ls "$root"/var/lib/dpkg/info/sealfs.* >/dev/null 2>&1 && fail "dpkg's info files are left: $(ls "$root"/var/lib/dpkg/info/sealfs.*)"
[ -e "$root/etc/sealfs" ] && fail "/etc/sealfs is left after purge"
left=
for path in $files; do
  [ -e "$root$path" ] || [ -L "$root$path" ] || continue
  in_root dpkg-query -S "$path" >/dev/null 2>&1 || left="$left $path"
done
[ -z "$left" ] || fail "left after purge, owned by no package:$left"
# Every package of the first set is still there, every one that sealfs
# pulled is gone; what is left beyond the first set can only come from man-db
# (autoremove keeps some of its dependencies, e.g. bsdextrautils).
package_set >"$work/final.set"
lost=$(comm -23 "$work/first.set" "$work/final.set")
[ -z "$lost" ] || fail "packages of the first set are gone or changed: $lost"
extra=$(comm -13 "$work/first.set" "$work/final.set" | awk '{ print $2 }')
kept=$(echo "$extra" | grep -xF "$(echo "$pulled")")
[ -z "$kept" ] || fail "packages that sealfs pulled are left after purge and autoremove: $(echo $kept)"
from_man=$(comm -13 "$work/sealfs.set" "$work/final.set" | awk '{ print $2 }')
[ "$(echo "$extra")" = "$(echo "$from_man")" ] || fail "left after purge, not from man-db: $(echo $extra)"
echo "ok   purged: nothing of sealfs left, /etc/sealfs gone, its dependencies autoremoved${extra:+ (man-db left: $(echo $extra))}"
phase "done"
