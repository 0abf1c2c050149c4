#!/usr/bin/env bash
# Large reads of one sealed file (issue 25: within 1.2x plain). A file of
# SIZE_MIB MiB (default 1024) is published into a store through a sealfs
# mount (written under a temporary name, renamed into place: a file entry),
# then read to its end with dd bs=1M: from the backing directory itself
# (plain), and through a fresh mount of each build over that store: a stat
# first (the lookup and its verification are not timed), then the first read
# and a second one. B's pages are warm before each sample, so every column
# reads from the page cache; what differs is the path the bytes take.
#
#   tests/bench/large_read_bench.sh [SIZE_MIB] [RUNS]
#
# SEALFS (default build/release/fs/sealfs: libfuse 3.14, every READ reaches
# the daemon) and PT (default build/passthrough/fs/sealfs mounted with
# -o passthrough: the kernel reads B's file itself; left out when that binary
# is missing). Prints the median of RUNS (default 7) runs per column, in
# seconds, and each column's ratio to plain. Needs root (or fusermount3).
set -euo pipefail
source "$(dirname "$0")/bench_mounts.sh"  # median

SIZE_MIB=${1:-1024}
RUNS=${2:-7}
SEALFS=${SEALFS:-build/release/fs/sealfs}
PT=${PT:-build/passthrough/fs/sealfs}
WORK=$(mktemp -d "${BENCH_TMP:-/tmp}/large_read_bench.XXXXXX")
B=$WORK/b
M=$WORK/m
mkdir -p "$B" "$M"
cleanup() {
  fusermount3 -u "$M" 2>/dev/null || true
  rm -rf "$WORK"
}
trap cleanup EXIT

mount_sealfs() { # BINARY OPTIONS
  "$1" -o "profile=generic,cache_timeout=600$2" "$B" "$M"
}
unmount() {
  fusermount3 -u "$M"
  # The daemon seals and exits after the unmount: wait, so the next mount
  # finds the store settled.
  while pgrep -f "sealfs.* $B $M" > /dev/null; do sleep 0.05; done
}

mount_sealfs "$SEALFS" ""
head -c "$((SIZE_MIB << 20))" /dev/urandom > "$M/blob.tmp"
mv "$M/blob.tmp" "$M/blob.bin"
unmount
"$SEALFS" fsck "$B" 2> /dev/null | grep -q "valid 1, invalid 0" || {
  echo "large_read_bench: blob.bin did not seal" >&2
  exit 1
}

seconds() { # FILE: seconds to read it to its end
  local start end
  start=$(date +%s.%N)
  dd if="$1" of=/dev/null bs=1M status=none
  end=$(date +%s.%N)
  echo "$end - $start" | bc
}

declare -A samples
names=(plain)
[[ -x $PT ]] && have_pt=1 || have_pt=
names+=(sealfs-first sealfs-second)
[[ -n $have_pt ]] && names+=(PT-first PT-second)

one_mount() { # NAME BINARY OPTIONS
  cat "$B/blob.bin" > /dev/null
  mount_sealfs "$2" "$3"
  stat "$M/blob.bin" > /dev/null
  samples[$1-first]+=" $(seconds "$M/blob.bin")"
  samples[$1-second]+=" $(seconds "$M/blob.bin")"
  unmount
}

for _ in $(seq "$RUNS"); do
  cat "$B/blob.bin" > /dev/null
  samples[plain]+=" $(seconds "$B/blob.bin")"
  one_mount sealfs "$SEALFS" ""
  [[ -n $have_pt ]] && one_mount PT "$PT" ",passthrough"
done

plain=$(tr ' ' '\n' <<< "${samples[plain]}" | grep . | median)
echo "large read of a sealed ${SIZE_MIB} MiB file, dd bs=1M, median of $RUNS (s):"
for n in "${names[@]}"; do
  m=$(tr ' ' '\n' <<< "${samples[$n]}" | grep . | median)
  printf "  %-14s %8.4f  %5.2fx plain\n" "$n" "$m" "$(echo "$m / $plain" | bc -l)"
done
