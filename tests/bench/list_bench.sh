#!/usr/bin/env bash
# Listing a sealfs store against the plain backing directory (issue 14).
#
#   tests/bench/list_bench.sh [SEALFS_BINARY] [ENTRIES] [RUNS]
#
# Saves ENTRIES (default 2000) TileLang-shaped entries (24 KiB and 8 KiB
# sources, a LIB_KB KiB ELF library (default 512), a 300-byte params file)
# through a mount with TileLang's protocol (temp files in tmp/, renamed into
# kernels/.staging/<key>_<pid>/, renamed to kernels/<key>), unmounts, mounts
# afresh with OPTIONS (default profile=tilelang,cache_timeout=600) and times
# `ls -la M/kernels`, `find M -type f` and `du -s M`: the first run of each
# on the fresh mount, then the median of RUNS (default 7) repeated runs,
# interleaved with the same commands on the backing directory. BEFORE=BINARY
# mounts another build too (its own mountpoint, the same store) and adds its
# column, interleaved with the others. Needs root (or fusermount3) and
# python3. WORK (default a new directory under /tmp) holds the store; KEEP=1
# leaves it there for the next run.
set -euo pipefail

SEALFS=${1:-build/release/fs/sealfs}
ENTRIES=${2:-2000}
RUNS=${3:-7}
LIB_KB=${LIB_KB:-512}
OPTIONS=${OPTIONS:-profile=tilelang,cache_timeout=600}
BEFORE=${BEFORE:-}
WORK=${WORK:-$(mktemp -d /tmp/list_bench.XXXXXX)}
B=$WORK/backing
M=$WORK/mnt
MB=$WORK/mnt-before
mkdir -p "$B" "$M" "$MB"

unmount() { fusermount3 -u "$1" 2>/dev/null || umount "$1" 2>/dev/null || true; }
cleanup() {
  unmount "$M"
  unmount "$MB"
  [[ ${KEEP:-0} == 1 ]] || rm -rf "$WORK"
}
trap cleanup EXIT

# The median of the numbers on stdin.
median() { sort -g | awk '{a[NR] = $1} END {print (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2}'; }

# Seconds one run of "$@" takes (output discarded).
seconds() {
  local t0 t1
  t0=$(date +%s.%N)
  "$@" >/dev/null 2>&1
  t1=$(date +%s.%N)
  echo "$t1 - $t0" | bc -l
}

save_entries() {
  python3 - "$1" "$ENTRIES" "$LIB_KB" <<'EOF'
import os, random, struct, sys
cache, count, lib_kb = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
os.makedirs(os.path.join(cache, "tmp"), exist_ok=True)
os.makedirs(os.path.join(cache, "kernels", ".staging"), exist_ok=True)
# A 64-bit ELF shared-object header without CUDA images (the tilelang profile validates *.so).
elf = b"\x7fELF\x02\x01\x01\x00" + bytes(8) + struct.pack("<HHI", 3, 62, 1) + bytes(28) + struct.pack("<H", 64)
elf = elf.ljust(64, b"\x00")
for i in range(count):
    rnd = random.Random(i)
    key = "%064x" % rnd.getrandbits(256)
    files = {"device_kernel.cu": rnd.randbytes(24 * 1024), "host_kernel.cu": rnd.randbytes(8 * 1024),
             "kernel_lib.so": elf + rnd.randbytes(lib_kb * 1024 - 64), "params.pkl": rnd.randbytes(300)}
    staging = os.path.join(cache, "kernels", ".staging", "%s_%d" % (key, os.getpid()))
    os.mkdir(staging)
    for name, data in files.items():
        tmp = os.path.join(cache, "tmp", "tmp_%d_%s" % (os.getpid(), name))
        with open(tmp, "wb") as f:
            f.write(data)
        os.replace(tmp, os.path.join(staging, name))
    os.rename(staging, os.path.join(cache, "kernels", key))
EOF
}

if [[ ! -d $B/kernels ]]; then
  echo "saving $ENTRIES entries through a mount..." >&2
  "$SEALFS" "$B" "$M" -o profile=tilelang,durability=none
  save_entries "$M"
  unmount "$M"
  sleep 1
fi

targets=(plain sealfs)
declare -A root=([plain]=$B [sealfs]=$M)
"$SEALFS" "$B" "$M" -o "$OPTIONS"
if [[ -n $BEFORE ]]; then
  "$BEFORE" "$B" "$MB" -o "$OPTIONS"
  targets+=(before)
  root[before]=$MB
fi

declare -A first times
for t in "${targets[@]:1}"; do
  first[ls_$t]=$(seconds ls -la "${root[$t]}/kernels")
  first[find_$t]=$(seconds find "${root[$t]}" -type f)
  first[du_$t]=$(seconds du -s "${root[$t]}")
done
echo "entries listed: $(find "$M/kernels" -mindepth 1 -maxdepth 1 -not -name ".*" | wc -l)" >&2

for ((r = 0; r < RUNS; r++)); do
  for t in "${targets[@]}"; do times[ls_$t]+="$(seconds ls -la "${root[$t]}/kernels") "; done
  for t in "${targets[@]}"; do times[find_$t]+="$(seconds find "${root[$t]}" -type f) "; done
  for t in "${targets[@]}"; do times[du_$t]+="$(seconds du -s "${root[$t]}") "; done
done

printf '%-6s %9s %18s %18s\n' op plain "sealfs (ratio)" "${BEFORE:+before (ratio)}"
for op in ls find du; do
  line=""
  for t in "${targets[@]}"; do
    med=$(tr ' ' '\n' <<<"${times[${op}_$t]}" | grep . | median)
    if [[ $t == plain ]]; then
      plain=$med
      line=$(printf '%-6s %9.4f' "$op" "$med")
    else
      line+=$(printf ' %9.4f (%5.1fx)' "$med" "$(echo "$med / $plain" | bc -l)")
    fi
  done
  echo "$line"
done
printf 'first run on the fresh mount:'
for t in "${targets[@]:1}"; do printf ' %s ls %.3f find %.3f du %.3f;' "$t" "${first[ls_$t]}" "${first[find_$t]}" "${first[du_$t]}"; done
echo
