#!/bin/sh
# Tests sealfs-mountctl against a fake mountinfo and a fake fusermount3, so no
# mount and no privilege are needed: it must act only when FUSE is the topmost
# mount at the (escaped) path, and never on the filesystem underneath.
# usage: mountctl_test.sh PATH/TO/sealfs-mountctl
set -u
mountctl=$1
work=$(mktemp -d) || exit 1
trap 'rm -rf "$work"' EXIT
failures=0

check() {  # check NAME EXPECTED ACTUAL
  if [ "$2" = "$3" ]; then echo "ok   $1"; else echo "FAIL $1: expected [$2], got [$3]"; failures=$((failures + 1)); fi
}

mkdir -p "$work/with space/cache" "$work/bin"
cat > "$work/bin/fusermount3" <<'FAKE'
#!/bin/sh
echo "$*" >> "$FAKE_LOG"
FAKE
chmod +x "$work/bin/fusermount3"
export FUSERMOUNT3="$work/bin/fusermount3" FAKE_LOG="$work/log" SEALFS_MOUNTINFO="$work/mountinfo"

real=$(realpath "$work")
mp="$real/with space/cache"
esc=$(printf '%s' "$mp" | sed 's/ /\\040/g')
ext4_line="36 25 8:1 / $esc rw,relatime shared:1 - ext4 /dev/sda1 rw"
fuse_line="90 36 0:50 / $esc rw,nosuid,nodev,relatime shared:2 - fuse.sealfs $esc rw,user_id=0,group_id=0"
other_line="37 25 8:2 / $real/with\\040space rw - xfs /dev/sdb1 rw"

run() {  # run ACTION [ARGS] -> prints "rc|fusermount3 calls"
  : > "$FAKE_LOG"
  "$mountctl" "$@" >/dev/null 2>&1
  rc=$?
  echo "$rc|$(cat "$FAKE_LOG")"
}

# The build filled in every placeholder, and fusermount3's default is absolute.
check "no @PLACEHOLDER@ left" "0" "$(grep -c '@[A-Z0-9_]*@' "$mountctl")"
check "fusermount3 default is an absolute path" "1" "$(grep -c '^FUSERMOUNT3=${FUSERMOUNT3:-/' "$mountctl")"

# FUSE on top of the real filesystem: unmount and wait act on it.
printf '%s\n%s\n%s\n' "$other_line" "$ext4_line" "$fuse_line" > "$SEALFS_MOUNTINFO"
check "unmount with fuse on top" "0|-u -- $mp" "$(run unmount "$mp")"
check "unmount through a path with ./ and //" "0|-u -- $real/with space//./cache/" "$(run unmount "$real/with space//./cache/")"
check "wait sees the fuse mount" "0|" "$(run wait "$mp" 1)"
check "clear-stale leaves a live mount" "0|" "$(run clear-stale "$mp")"

# Only the real filesystem: nothing may be unmounted, wait times out.
printf '%s\n%s\n' "$other_line" "$ext4_line" > "$SEALFS_MOUNTINFO"
check "unmount with ext4 on top does nothing" "0|" "$(run unmount "$mp")"
check "wait times out without fuse" "1|" "$(run wait "$mp" 0)"

# FUSE underneath something else is not on top.
printf '%s\n%s\n%s\n' "$ext4_line" "$fuse_line" "$(printf '%s' "$ext4_line" | sed 's/^36/91/')" > "$SEALFS_MOUNTINFO"
check "fuse below another mount is left alone" "0|" "$(run unmount "$mp")"

# A FUSE mount on the parent does not count for the child.
printf '%s\n' "90 36 0:50 / $real/with\\040space rw - fuse.sealfs x rw" > "$SEALFS_MOUNTINFO"
check "fuse on the parent is not the mount point" "0|" "$(run unmount "$mp")"

# A dead FUSE mount (stat fails; simulated by a missing last component).
dead="$real/with space/gone"
printf '%s\n' "90 36 0:50 / $real/with\\040space/gone rw - fuse.sealfs x rw" > "$SEALFS_MOUNTINFO"
check "clear-stale detaches a dead fuse mount" "0|-u -z -- $dead" "$(run clear-stale "$dead")"

# Usage errors.
check "unknown action" "2|" "$(run frobnicate "$mp")"
check "missing mount point" "2|" "$(run wait)"
check "bad seconds" "2|" "$(run wait "$mp" soon)"
check "parent does not exist" "1|" "$(run wait "$real/nope/x" 1)"

[ "$failures" -eq 0 ] && echo "all passed" || echo "$failures failed"
[ "$failures" -eq 0 ]
