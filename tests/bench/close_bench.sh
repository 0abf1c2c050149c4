#!/usr/bin/env bash
# What a writer's close costs on a mount, by how many descriptors the writing
# process holds elsewhere: plain directory, bindfs, sealfs.
#
#   tests/bench/close_bench.sh [SEALFS_BINARY] [RUNS]
#
# By default sealfs asks for OPEN and RELEASE, and RELEASE tells a writer's
# last close exactly. With -o no_open (the default before issue 23 point 7)
# it learns at each FLUSH of a process that changed a file whether that
# process still holds a descriptor on it, by walking /proc/<pid>/fdinfo: a
# cost per descriptor the process holds, paid at every close of a written
# file. The workload: a process holding HELD open descriptors on /dev/null
# (as a framework with sockets, pipes and shared libraries does) creates,
# writes 4 KiB to and closes 200 files, for HELD in 0, 100, 1000 and 4000.
# Prints the median of RUNS (default 5) runs per column, in µs per file, and
# each mount's ratio to plain. sealfs mounts with durability=none, so the
# publish fsyncs do not hide the close; the no_open column is the same
# build with -o no_open (WITH_NO_OPEN= leaves it out). BEFORE=BINARY adds
# another build's column. Needs root (or fusermount3), bindfs, python3.
set -euo pipefail

SEALFS=${1:-build/release/fs/sealfs}
RUNS=${2:-5}
BEFORE=${BEFORE:-}
WITH_NO_OPEN=${WITH_NO_OPEN-1}
source "$(dirname "$0")/bench_mounts.sh"
bench_mounts close_bench "$SEALFS"

# µs per create+write+close of 200 files, holding $2 other descriptors.
one_run() {
  python3 - "$1" "$2" <<'EOF'
import os, sys, time
root, held = sys.argv[1], int(sys.argv[2])
fds = [os.open("/dev/null", os.O_RDONLY) for _ in range(held)]
d = os.path.join(root, f"d{held}_{os.getpid()}_{time.monotonic_ns()}")
os.makedirs(d)
t = time.perf_counter()
for i in range(200):
    fd = os.open(os.path.join(d, f"f{i}"), os.O_WRONLY | os.O_CREAT, 0o644)
    os.write(fd, b"x" * 4096)
    os.close(fd)
print(f"{(time.perf_counter() - t) / 200 * 1e6:.0f}")
EOF
}

median() { sort -n | awk '{a[NR] = $1} END {print (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2}'; }

printf "%-6s" held
for n in "${names[@]}"; do printf " %10s" "$n"; done
for n in "${names[@]:1}"; do printf " %12s" "$n/plain"; done
echo "   (µs per create+write+close, median of $RUNS)"
for held in 0 100 1000 4000; do
  declare -A samples=()
  for ((r = 0; r < RUNS; r++)); do  # columns alternated within each run
    for c in "${columns[@]}"; do samples[$c]+="$(one_run "$WORK/$c" "$held") "; done
  done
  printf "%-6s" "$held"
  declare -A med=()
  for c in "${columns[@]}"; do
    med[$c]=$(tr ' ' '\n' <<<"${samples[$c]}" | grep . | median)
    printf " %10s" "${med[$c]}"
  done
  for c in "${columns[@]:1}"; do printf " %12s" "$(awk -v a="${med[$c]}" -v b="${med[plain]}" 'BEGIN {printf "%.1fx", a / (b > 0 ? b : 1)}')"; done
  echo
  unset samples med
done
