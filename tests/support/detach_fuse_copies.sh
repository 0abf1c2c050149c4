#!/bin/sh
# Run right after `unshare -m`: the new mount namespace holds a copy of every
# mount of the one it came from, among them the FUSE mounts of the tests
# running beside this one. A copy keeps its FUSE connection alive, so such a
# daemon would not see its own unmount end the connection until this
# namespace ends (minutes, for the package tests): it stayed up after
# `fusermount3 -u` ("sealfs did not exit after unmount"). The copies are
# detached here; nothing in this namespace uses them.
awk '{ for (i = 7; $i != "-"; i++) ; if ($(i + 1) ~ /^fuse/) print $5 }' /proc/self/mountinfo |
  sort -r | while IFS= read -r m; do umount -l "$m" 2>/dev/null || true; done
