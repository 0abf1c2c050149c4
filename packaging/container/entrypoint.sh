#!/bin/sh
# The sealfs sidecar's entrypoint: prepares the view, detaches a mount left
# dead by a crashed predecessor, then becomes the daemon (exec, so that
# SIGTERM from `podman stop` / the kubelet reaches libfuse, which unmounts).
#
# Layout, all in one volume shared with the host (mount propagation rshared /
# Bidirectional), mounted at /vol:
#   /vol/backing      SEALFS_BACKING: the real cache; only this container sees it
#   /vol/view         root 0555; the app's volume (read-only, HostToContainer
#                     / rslave propagation)
#   /vol/view/cache   SEALFS_MOUNTPOINT: where sealfs mounts. While nothing is
#                     mounted it is an empty root 0555 directory in the app's
#                     read-only volume: the app only misses and cannot save.
#                     Mounted (the FUSE mount keeps its own rw flag), its root
#                     shows the backing directory's owner and mode.
# The app gets the directory above the mount point, never the mount point
# itself: a bind mount of a path that has a mount on top captures that mount,
# which then stays dead in the app when the sidecar stops (no later mount
# reaches it).
#
# Environment:
#   SEALFS_BACKING     default /vol/backing
#   SEALFS_MOUNTPOINT  default /vol/view/cache (must not overlap the backing)
#   SEALFS_OPTIONS     default profile=generic,allow_other
#   SEALFS_OWNER       uid:gid that owns the backing directory (the app's),
#                      set at every start; empty leaves it as it is
set -eu

backing=${SEALFS_BACKING:-/vol/backing}
view=${SEALFS_MOUNTPOINT:-/vol/view/cache}
options=${SEALFS_OPTIONS:-profile=generic,allow_other}
owner=${SEALFS_OWNER:-}
mountctl=/usr/libexec/sealfs/sealfs-mountctl

fail() {
  echo "sealfs-entrypoint: $*" >&2
  exit 1
}

# Lexical absolute paths: the view must not be touched before clear-stale
# (a dead mount answers every stat with ENOTCONN).
backing=$(realpath -m -s -- "$backing")
view=$(realpath -m -s -- "$view")
case $view/ in "$backing"/*) fail "SEALFS_MOUNTPOINT ($view) must not be the backing directory or inside it" ;; esac
case $backing/ in "$view"/*) fail "SEALFS_BACKING ($backing) must not be inside SEALFS_MOUNTPOINT ($view)" ;; esac
parent=$(dirname -- "$view")
[ "$parent" != / ] || fail "SEALFS_MOUNTPOINT ($view) needs a parent directory to share with the app"

mkdir -p -- "$backing" "$parent"
if [ -n "$owner" ]; then
  case $owner in *[!0-9:]* | :* | *: | *:*:*) fail "SEALFS_OWNER must be uid or uid:gid, got '$owner'" ;; esac
  chown -- "$owner" "$backing"
fi

# A FUSE mount whose daemon died with the previous container (SIGKILL of
# its pid namespace leaves no one to unmount; auto_unmount's watchdog dies
# with it). Detached here, the detach propagates to the host and the app.
"$mountctl" clear-stale "$view"
if "$mountctl" wait "$view" 0 2>/dev/null; then
  fail "$view is already mounted by a live FUSE daemon"
fi

mkdir -p -- "$view"
chown 0:0 -- "$parent" "$view"
chmod 0555 -- "$parent" "$view"
[ -z "$(ls -A -- "$view")" ] || fail "$view is not empty; the app would see its content while sealfs is down"

exec sealfs -f -o "$options" "$backing" "$view"
