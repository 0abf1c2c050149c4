#!/usr/bin/env bash
# A growing cache against a daemon with few descriptors (issue 24).
#
#   tests/bench/scale_bench.sh [SEALFS_BINARY] [FILES]
#
# Saves FILES (default 10000; a multiple of 4) files as TileLang-shaped
# entries (4 small files each: 2 KiB and 1 KiB sources, a 4 KiB ELF library,
# a 300-byte params file) through a mount whose daemon runs under
# `prlimit --nofile=LIMIT:LIMIT` (default 1024), then on a fresh mount times,
# against the backing directory itself: the mount, the first `find -type f`
# after the kernel dropped its dentries, `ls -laR`, `du -s`, lookups/s (stat
# of every file) cold and warm, and records the daemon's descriptors and RSS
# after each (the most seen while saving, sampled every 0.2 s). Then, with
# the limit at BIG (default this shell's hard limit; from 197,000 the daemon
# keeps up to 65,536 inodes),
# the RSS each remembered inode costs; and offline, `sealfs fsck` against
# `sha256sum` of the same files on both cores. Prints a Markdown table.
# Needs root (drop_caches, prlimit) and python3. WORK (default a new
# directory under /tmp) holds everything; KEEP=1 leaves it, and REUSE=1 with
# that WORK skips the save and measures the store saved there.
set -euo pipefail

SEALFS=$(realpath "${1:-build/release/fs/sealfs}")
FILES=${2:-10000}
LIMIT=${LIMIT:-1024}
BIG=${BIG:-$(ulimit -Hn)}
WORK=${WORK:-$(mktemp -d /tmp/scale_bench.XXXXXX)}
B=$WORK/backing
M=$WORK/mnt
mkdir -p "$B" "$M"
OPTS=profile=tilelang,durability=none

unmount() { fusermount3 -u "$1" 2>/dev/null || umount "$1" 2>/dev/null || true; }
cleanup() {
  [[ -n ${SAMPLER:-} ]] && kill "$SAMPLER" 2>/dev/null
  unmount "$M"
  [[ ${KEEP:-0} == 1 ]] || rm -rf "$WORK"
}
trap cleanup EXIT

now() { date +%s.%N; }
since() { echo "$(now) - $1" | bc -l; }
seconds() {
  local t0
  t0=$(now)
  "$@" >/dev/null 2>&1
  since "$t0"
}
drop_dentries() {
  sync
  echo 2 >/proc/sys/vm/drop_caches
}
mount_it() { prlimit --nofile="$1:$1" -- "$SEALFS" "$B" "$M" -o "$OPTS"; }
# The daemon serving $M (its command line names the mountpoint).
daemon_pid() {
  local p
  for p in /proc/[0-9]*; do
    if { tr '\0' ' ' <"$p/cmdline"; } 2>/dev/null | grep -q -- " $M"; then
      basename "$p"
      return
    fi
  done
}
fds() { find "/proc/$1/fd" -mindepth 1 -maxdepth 1 2>/dev/null | wc -l; }
rss_kb() { awk '/^VmRSS/ {print $2}' "/proc/$1/status"; }
gauge() { "$SEALFS" status "$M" | python3 -c "import json,sys; print(json.load(sys.stdin).get('$1', '-'))"; }

# Saves FILES/4 entries through the mount with TileLang's protocol.
save_entries() {
  python3 - "$1" "$((FILES / 4))" <<'EOF'
import os, random, struct, sys
cache, count = sys.argv[1], int(sys.argv[2])
os.makedirs(os.path.join(cache, "tmp"), exist_ok=True)
os.makedirs(os.path.join(cache, "kernels", ".staging"), exist_ok=True)
elf = b"\x7fELF\x02\x01\x01\x00" + bytes(8) + struct.pack("<HHI", 3, 62, 1) + bytes(28) + struct.pack("<H", 64)
elf = elf.ljust(64, b"\x00")
for i in range(count):
    rnd = random.Random(i)
    key = "%064x" % rnd.getrandbits(256)
    files = {"device_kernel.cu": rnd.randbytes(2048), "host_kernel.cu": rnd.randbytes(1024),
             "kernel_lib.so": elf + rnd.randbytes(4096 - 64), "params.pkl": rnd.randbytes(300)}
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

# stat of every path in $1 (one per line, relative) under $2: lookups/s.
stat_rate() {
  python3 - "$1" "$2" <<'EOF'
import os, sys, time
paths = [os.path.join(sys.argv[2], p) for p in open(sys.argv[1]).read().split("\n") if p]
t0 = time.monotonic()
for p in paths:
    os.stat(p)
print("%.0f" % (len(paths) / (time.monotonic() - t0)))
EOF
}

declare -A plain sealfs dfd drss
row() { printf '| %s | %s | %s | %s | %s |\n' "$1" "${plain[$1]:--}" "${sealfs[$1]:--}" "${dfd[$1]:--}" "${drss[$1]:--}"; }
record() {
  dfd[$1]=$(fds "$PID")
  drss[$1]="$(($(rss_kb "$PID") / 1024)) MB"
}

if [[ ${REUSE:-0} == 1 && -d $B/kernels ]]; then
  echo "reusing the store saved in $B (the save row stays empty)" >&2
else
  echo "saving $FILES files ($((FILES / 4)) entries) through a mount limited to $LIMIT descriptors..." >&2
  mount_it "$LIMIT"
  PID=$(daemon_pid)
  (
    max_fd=0 max_rss=0
    while kill -0 "$PID" 2>/dev/null; do
      f=$(fds "$PID") r=$(rss_kb "$PID" || echo 0)
      ((f > max_fd)) && max_fd=$f
      ((r > max_rss)) && max_rss=$r
      echo "$max_fd $max_rss" >"$WORK/save_max"
      sleep 0.2
    done
  ) &
  SAMPLER=$!
  t0=$(now)
  save_entries "$M"
  sealfs[save]=$(printf '%.1f s' "$(since "$t0")")
  read -r f r <"$WORK/save_max"
  dfd[save]="$f (most)"
  drss[save]="$((r / 1024)) MB (most)"
  kill "$SAMPLER" 2>/dev/null || true
  SAMPLER=
  echo "saved; inodes $(gauge inodes) of bound $(gauge inode_bound), descriptors $(gauge descriptors)" >&2
  unmount "$M"
  sleep 1
fi
(cd "$B" && find kernels -type f -not -name '.sealfs*' | sort) >"$WORK/files"
echo "files in B: $(wc -l <"$WORK/files")" >&2

drop_dentries
t0=$(now)
mount_it "$LIMIT"
sealfs[mount]=$(printf '%.3f s' "$(since "$t0")")
PID=$(daemon_pid)
record mount
for op in find ls du; do
  case $op in
    find) cmd=(find @ -type f) ;;
    ls) cmd=(ls -laR @) ;;
    du) cmd=(du -s @) ;;
  esac
  drop_dentries
  plain[$op]=$(printf '%.3f s' "$(seconds "${cmd[@]/@/$B}")")
  drop_dentries
  sealfs[$op]=$(printf '%.3f s' "$(seconds "${cmd[@]/@/$M}")")
  record "$op"
done
drop_dentries
plain[cold]="$(stat_rate "$WORK/files" "$B")/s"
plain[warm]="$(stat_rate "$WORK/files" "$B")/s"
drop_dentries
sealfs[cold]="$(stat_rate "$WORK/files" "$M")/s"
record cold
sealfs[warm]="$(stat_rate "$WORK/files" "$M")/s"
record warm
echo "limited: inodes $(gauge inodes) of bound $(gauge inode_bound), descriptors $(gauge descriptors)" >&2
unmount "$M"
sleep 1

# RSS per remembered inode: a limit high enough that the kernel keeps them.
drop_dentries
mount_it "$BIG"
PID=$(daemon_pid)
base=$(rss_kb "$PID")
sealfs[bigcold]="$(stat_rate "$WORK/files" "$M")/s"
sealfs[bigwarm]="$(stat_rate "$WORK/files" "$M")/s"
inodes=$(gauge inodes)
after=$(rss_kb "$PID")
per_inode=$(echo "($after - $base) * 1024 / $inodes" | bc)
sealfs[inode]="$per_inode B/inode"
dfd[inode]=$(fds "$PID")
drss[inode]="$((after / 1024)) MB"
echo "limit $BIG: $inodes inodes, RSS $base -> $after kB" >&2
unmount "$M"
sleep 1

sealfs[fsck]=$(printf '%.2f s' "$(seconds "$SEALFS" fsck -o profile=tilelang "$B")")
plain[fsck]=$(printf '%.2f s' "$(seconds bash -c "cd '$B' && xargs -a '$WORK/files' -d '\n' -P 2 -n 500 sha256sum")")

echo
echo "$FILES files, daemon limit $LIMIT (bound $(
  python3 -c "l=$LIMIT; h=128+l//16; print(min((l-h)//3, 65536))"
) inodes):"
echo
echo "| step | plain B | sealfs | daemon fds | daemon RSS |"
echo "|---|---|---|---|---|"
for k in save mount find ls du cold warm; do row "$k"; done
printf '| limit %s: lookups cold / warm | - | %s / %s | - | - |\n' "$BIG" "${sealfs[bigcold]}" "${sealfs[bigwarm]}"
printf '| limit %s: RSS per inode remembered | - | %s | %s | %s |\n' "$BIG" "${sealfs[inode]}" "${dfd[inode]}" "${drss[inode]}"
printf '| fsck vs sha256sum -P2 | %s | %s | - | - |\n' "${plain[fsck]}" "${sealfs[fsck]}"
