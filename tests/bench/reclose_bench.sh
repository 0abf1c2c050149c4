#!/usr/bin/env bash
# What closing a large file many times costs (issue 23, point 8): a file of
# SIZE MiB is written in 2 MiB chunks and closed, then rewritten chunk by
# chunk with an open and a close around each chunk (SIZE/2 closes), as
# xfstests generic/247 closes one large file over and over. Plain directory,
# bindfs and sealfs in the same run; median of RUNS runs, seconds, and each
# mount's ratio to bindfs. sealfs's time includes the wait until the file is
# sealed (its sidecar manifest records the final size and digest), so a seal
# that comes later is not hidden. BEFORE=BINARY adds another build's column.
#
#   tests/bench/reclose_bench.sh [SEALFS_BINARY] [RUNS] [SIZE_MIB]
#
# Needs root (or fusermount3), bindfs, python3.
set -euo pipefail

SEALFS=${1:-build/release/fs/sealfs}
RUNS=${2:-3}
SIZE=${3:-200}
BEFORE=${BEFORE:-}
source "$(dirname "$0")/bench_mounts.sh"
bench_mounts reclose_bench "$SEALFS"
backing=("" "" "$WORK/sb")
[[ -z $BEFORE ]] || backing+=("$WORK/pb")

# One run: seconds from the first write to the file being sealed (sidecar
# with the final digest) on sealfs, or to the last close elsewhere.
workload='
import hashlib, os, sys, time
path, size_mib, sidecar = sys.argv[1], int(sys.argv[2]), sys.argv[3]
chunk = 2 << 20
n = size_mib * (1 << 20) // chunk
if os.path.exists(path):
    os.unlink(path)
t = time.monotonic()
with open(path, "wb") as f:
    for i in range(n):
        f.write(bytes([i % 251]) * chunk)
for i in range(n):
    with open(path, "r+b") as f:
        f.seek(i * chunk)
        f.write(bytes([(i + 7) % 251]) * chunk)
want = hashlib.sha256(b"".join(bytes([(i + 7) % 251]) * chunk for i in range(n))).hexdigest()
def sealed():
    return not sidecar or (os.path.exists(sidecar) and want in open(sidecar).read())
while not sealed():
    time.sleep(0.01)
print(time.monotonic() - t)
'
median() { sort -g | awk '{ a[NR] = $1 } END { print a[int((NR + 1) / 2)] }'; }

declare -A result
for i in "${!columns[@]}"; do
  col=${columns[$i]}
  sidecar=""
  [[ -n ${backing[$i]} ]] && sidecar="${backing[$i]}/.sealfs-manifest.big"
  for _ in $(seq "$RUNS"); do
    python3 -c "$workload" "$WORK/$col/big" "$SIZE" "$sidecar"
  done | median > "$WORK/median"
  result[$col]=$(cat "$WORK/median")
done

printf '%-10s %10s %10s\n' mount seconds "x bindfs"
for i in "${!columns[@]}"; do
  col=${columns[$i]}
  printf '%-10s %10.3f %10.2f\n' "${names[$i]}" "${result[$col]}" \
    "$(echo "${result[$col]} / ${result[bm]}" | bc -l)"
done
