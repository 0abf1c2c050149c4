# Sourced by deb_package_test.sh and wheel_test.sh (after `mirror`, `src` and
# `phase` are set): a work directory with a chroot root in it, a cleanup
# that unmounts everything under it (and stops `daemon_pid` when one was
# started), and the minbase bookworm tarball both tests start from, cached
# under build/deb-test for a week and made in the background
# (start_base_chroot; network, not CPU) while the caller builds.
cache="$src/build/deb-test"
base="$cache/bookworm-minbase.tar"
work=$(mktemp -d)
root="$work/root"
mkdir -p "$cache" "$root"

# Mount points at or under the chroot, deepest first (mountinfo's 5th field;
# the paths here have no characters that it escapes).
mounts_in_root() { awk -v r="$root" '$5 == r || index($5, r "/") == 1 { print $5 }' /proc/self/mountinfo | sort -r; }
cleanup() {
  [ -n "${chroot_base_pid:-}" ] && kill "$chroot_base_pid" 2>/dev/null
  [ -n "${daemon_pid:-}" ] && kill "$daemon_pid" 2>/dev/null
  for mp in $(mounts_in_root); do umount "$mp" 2>/dev/null || umount -l "$mp"; done
  if [ -n "$(mounts_in_root)" ]; then
    echo "FAIL: still mounted, $work left in place:"; mounts_in_root; exit 1
  else
    rm -rf --one-file-system "$work"
  fi
}
trap cleanup EXIT
trap 'exit 1' HUP INT TERM

# start_base_chroot NAME: make $base in the background (into $cache/NAME.tar
# first) unless a fresh one is cached; sets chroot_base_pid.
chroot_base_pid=
start_base_chroot() {
  if [ -z "$(find "$base" -mtime -7 2>/dev/null)" ]; then
    phase "mmdebstrap --variant=minbase bookworm (cached as $base)"
    rm -f "$base"
    mmdebstrap --quiet --variant=minbase bookworm "$cache/$1.tar" \
      "deb $mirror/debian bookworm main" "deb $mirror/debian bookworm-updates main" \
      "deb $mirror/debian-security bookworm-security main" >"$work/mmdebstrap.log" 2>&1 &
    chroot_base_pid=$!
  else
    phase "reusing $base"
  fi
}
