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
# build with -o no_open (WITH_NO_OPEN= leaves it out); seal_floor is a plain
# directory where the writer does a seal's file work itself after each close
# (WITH_SEAL_FLOOR= leaves it out), and bindfs+seal (printed) is bindfs plus
# that work: what a FUSE filesystem that seals each file costs at best on
# this store and these cores. BEFORE=BINARY adds
# another build's column. Needs root (or fusermount3), bindfs, python3.
set -euo pipefail

SEALFS=${1:-build/release/fs/sealfs}
RUNS=${2:-5}
BEFORE=${BEFORE:-}
WITH_NO_OPEN=${WITH_NO_OPEN-1}
source "$(dirname "$0")/bench_mounts.sh"
bench_mounts close_bench "$SEALFS"

# The seal floor: a plain directory where the writer itself, after each
# close, does the file work any seal under DESIGN's format must do: read the
# file back and hash it, create a temporary manifest beside it, write it and
# rename it over .sealfs-manifest.<name>. No FUSE, no daemon: what sealing
# costs on this backing store before any filesystem does it.
if [[ -n ${WITH_SEAL_FLOOR-1} ]]; then
  mkdir -p "$WORK/sf"
  columns+=(sf)
  names+=(seal_floor)
fi

# µs per create+write+close of 200 files, holding $2 other descriptors (and
# the seal's file work after each close, in the sf column).
one_run() {
  python3 - "$1" "$2" "$([[ $1 == */sf ]] && echo seal)" <<'EOF'
import hashlib, json, os, sys, time
root, held, seal = sys.argv[1], int(sys.argv[2]), sys.argv[3] == "seal"
fds = [os.open("/dev/null", os.O_RDONLY) for _ in range(held)]
d = os.path.join(root, f"d{held}_{os.getpid()}_{time.monotonic_ns()}")
os.makedirs(d)
dfd = os.open(d, os.O_RDONLY | os.O_DIRECTORY)
t = time.perf_counter()
for i in range(200):
    name = f"f{i}"
    fd = os.open(name, os.O_WRONLY | os.O_CREAT, 0o644, dir_fd=dfd)
    os.write(fd, b"x" * 4096)
    os.close(fd)
    if seal:
        fd = os.open(name, os.O_RDONLY, dir_fd=dfd)
        size, h = os.fstat(fd).st_size, hashlib.sha256(os.read(fd, 1 << 20)).hexdigest()
        os.close(fd)
        record = json.dumps({"files": {name: {"sha256": h, "size": size}}, "sealfs": 1}).encode()
        tmp = f".sealfs-manifest.tmp.{i}"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600, dir_fd=dfd)
        os.write(fd, record)
        os.close(fd)
        os.rename(tmp, f".sealfs-manifest.{name}", src_dir_fd=dfd, dst_dir_fd=dfd)
print(f"{(time.perf_counter() - t) / 200 * 1e6:.0f}")
EOF
}


printf "%-6s" held
for n in "${names[@]}"; do printf " %10s" "$n"; done
for n in "${names[@]:1}"; do printf " %12s" "$n/plain"; done
printf " %13s" sealfs/bindfs
[[ -n ${WITH_SEAL_FLOOR-1} ]] && printf " %13s %13s" bindfs+seal "sealfs/b+seal"
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
  ratio() { awk -v a="$1" -v b="$2" 'BEGIN {printf "%.2fx", a / (b > 0 ? b : 1)}'; }
  for c in "${columns[@]:1}"; do printf " %12s" "$(ratio "${med[$c]}" "${med[plain]}")"; done
  printf " %13s" "$(ratio "${med[sm]}" "${med[bm]}")"
  if [[ -n ${WITH_SEAL_FLOOR-1} ]]; then
    # bindfs plus the seal's own file work: the best a sealing FUSE daemon does here.
    best=$((med[bm] + med[sf] - med[plain]))
    printf " %13s %13s" "$best" "$(ratio "${med[sm]}" "$best")"
  fi
  echo
  unset samples med
done
