#!/bin/sh
# The sequences the packaging promises, on real mounts with the real daemon:
#  1. sealfs@.service: clear-stale, `sealfs -f -o OPTIONS B B`, wait, status,
#     unmount (ExecStop) -> the daemon exits 0 and nothing stays mounted;
#     SIGTERM (systemd's fallback) unmounts and exits 0 as well;
#  2. a daemon killed with SIGKILL leaves a dead mount that clear-stale
#     detaches, and the restarted daemon serves the same content; one that
#     holds its connection but answers nothing is aborted and detached;
#  3. an fstab line of type fuse.sealfs with mount-only options (nofail,
#     _netdev, x-systemd.*) mounts through mount.fuse3 with no helper of ours.
# Runs in a private mount namespace; needs root and /dev/fuse, else skipped (77),
# except under CI=true, where it fails instead: CI has both.
# usage: service_lifecycle_test.sh SEALFS_BINARY SEALFS_MOUNTCTL
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
mountctl=$(realpath "$2")
mount --make-rprivate /
sh "$(dirname "$0")/../../tests/support/detach_fuse_copies.sh"  # other tests' FUSE mounts, copied here
work=$(mktemp -d)
cache="$work/cache"
mkdir -p "$cache" "$work/bin"
failures=0
check() {  # check NAME EXPECTED ACTUAL
  if [ "$2" = "$3" ]; then echo "ok   $1"; else echo "FAIL $1: expected [$2], got [$3]"; failures=$((failures + 1)); fi
}
# Ours only: the namespace starts with copies of every mount on the host.
fuse_mounts() { grep " fuse.sealfs " /proc/self/mountinfo | grep -c " $cache "; }
cleanup() {
  while [ "$(fuse_mounts)" -gt 0 ]; do umount -l "$cache" 2>/dev/null || break; done
  umount /usr/local/sbin 2>/dev/null
  rm -rf "$work"
}
trap cleanup EXIT

# 1. the unit's sequence
"$mountctl" clear-stale "$cache"; check "ExecStartPre on a plain directory" 0 $?
"$sealfs" -f -o profile=tilelang,allow_other "$cache" "$cache" & daemon=$!
"$mountctl" wait "$cache" 30; check "ExecStartPost sees the mount" 0 $?
"$sealfs" status "$cache" >/dev/null; check "status through the mount" 0 $?
echo hello > "$cache/greeting.txt"
check "in-place write visible" hello "$(cat "$cache/greeting.txt")"
"$mountctl" unmount "$cache"; check "ExecStop" 0 $?
wait "$daemon"; check "daemon exit status after unmount" 0 $?
check "nothing left mounted" 0 "$(fuse_mounts)"

# 1b. systemd's fallback when ExecStop could not unmount: SIGTERM
"$sealfs" -f -o profile=tilelang "$cache" "$cache" & daemon=$!
"$mountctl" wait "$cache" 30
kill -TERM "$daemon"; wait "$daemon"; check "daemon exit status after SIGTERM" 0 $?
check "SIGTERM unmounted" 0 "$(fuse_mounts)"

# 2. crash and restart
"$sealfs" -f -o profile=tilelang "$cache" "$cache" & daemon=$!
"$mountctl" wait "$cache" 30
kill -KILL "$daemon"; wait "$daemon" 2>/dev/null
ls "$cache" >/dev/null 2>&1; check "dead mount answers with an error" 1 "$([ $? -ne 0 ] && echo 1 || echo 0)"
"$mountctl" clear-stale "$cache" 2>/dev/null; check "clear-stale" 0 $?
check "dead mount detached" 0 "$(fuse_mounts)"
"$sealfs" -f -o profile=tilelang "$cache" "$cache" & daemon=$!
"$mountctl" wait "$cache" 30; check "restart mounts again" 0 $?
check "content survives the crash" hello "$(cat "$cache/greeting.txt" 2>&1)"
"$mountctl" unmount "$cache"; wait "$daemon"; check "restarted daemon exits 0" 0 $?

# 2b. a daemon that holds its connection but answers nothing (what a SIGKILL
# leaves when one of its threads is stuck in the kernel; simulated with
# SIGSTOP): clear-stale aborts the connection through fusectl and detaches it
# in bounded time.
"$sealfs" -f -o profile=tilelang "$cache" "$cache" & daemon=$!
"$mountctl" wait "$cache" 30
kill -STOP "$daemon"
started=$(date +%s)
"$mountctl" clear-stale "$cache" 2>/dev/null; check "clear-stale of a mount that answers nothing" 0 $?
check "clear-stale took at most 10 s" 1 "$([ $(($(date +%s) - started)) -le 10 ] && echo 1 || echo 0)"
check "unanswering mount detached" 0 "$(fuse_mounts)"
kill -KILL "$daemon"; kill -CONT "$daemon"; wait "$daemon" 2>/dev/null
"$sealfs" -f -o profile=tilelang "$cache" "$cache" & daemon=$!
"$mountctl" wait "$cache" 30; check "restart after an aborted connection" 0 $?
check "content survives the abort" hello "$(cat "$cache/greeting.txt" 2>&1)"
"$mountctl" unmount "$cache"; wait "$daemon"; check "daemon exits 0 after the abort" 0 $?

# 3. fstab through mount.fuse3, which runs `sealfs` from a fixed PATH; put
# ours first in it, in this namespace only.
ln -s "$sealfs" "$work/bin/sealfs"
mount --bind "$work/bin" /usr/local/sbin
printf '%s %s fuse.sealfs profile=tilelang,nofail,_netdev,x-systemd.automount 0 0\n' "$cache" "$cache" > "$work/fstab"
mount -T "$work/fstab" "$cache"; check "mount -T fstab, type fuse.sealfs" 0 $?
check "listed as fuse.sealfs" 1 "$(fuse_mounts)"
"$sealfs" status "$cache" >/dev/null; check "status of the fstab mount" 0 $?
"$mountctl" unmount "$cache"; check "unmount the fstab mount" 0 $?
check "nothing left mounted at the end" 0 "$(fuse_mounts)"

[ "$failures" -eq 0 ] && echo "all passed" || echo "$failures failed"
[ "$failures" -eq 0 ]
