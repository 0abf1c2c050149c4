#!/usr/bin/env bash
# Loads every entry of a TileLang-shaped store back through a fresh mount
# whose daemon runs under `prlimit --nofile=LIMIT:LIMIT` (default 1024), and
# compares each file with the backing store (issue 24: "saves and loads
# 200,000 entries"; scale_bench.sh makes such a store, KEEP=1 keeps it).
#
#   tests/bench/load_check.sh BACKING [SEALFS_BINARY]
#
# Prints the files equal, different and failed (by errno), the most
# descriptors the daemon held (sampled) and its RSS at the end. Needs root.
set -euo pipefail
B=$(realpath "$1")
SEALFS=$(realpath "${2:-build/release/fs/sealfs}")
LIMIT=${LIMIT:-1024}
M=$(mktemp -d /tmp/load_check.XXXXXX)
trap 'fusermount3 -u "$M" 2>/dev/null || umount "$M" 2>/dev/null || true; rmdir "$M"' EXIT
sync
echo 2 >/proc/sys/vm/drop_caches
prlimit --nofile="$LIMIT:$LIMIT" -- "$SEALFS" "$B" "$M" -o profile=tilelang,durability=none
PID=$(pgrep -f -- "$B $M" | head -1)
start=$(date +%s)
python3 - "$B" "$M" "$PID" <<'PY'
import os, sys
b, m, pid = sys.argv[1], sys.argv[2], sys.argv[3]
ok = bad = err = 0
most_fds = 0
errs = {}
kernels = os.path.join(b, "kernels")
for i, key in enumerate(sorted(os.listdir(kernels))):
    if key.startswith("."):
        continue
    for name in ("device_kernel.cu", "host_kernel.cu", "kernel_lib.so", "params.pkl"):
        try:
            with open(os.path.join(m, "kernels", key, name), "rb") as f:
                got = f.read()
            with open(os.path.join(kernels, key, name), "rb") as f:
                want = f.read()
            ok, bad = (ok + 1, bad) if got == want else (ok, bad + 1)
        except OSError as e:
            err += 1
            errs[e.errno] = errs.get(e.errno, 0) + 1
    if i % 1000 == 0:
        most_fds = max(most_fds, len(os.listdir(f"/proc/{pid}/fd")))
rss = [l for l in open(f"/proc/{pid}/status") if l.startswith("VmRSS")][0].split()[1]
print(f"files read: {ok} equal, {bad} different, {err} errors {errs}; "
      f"daemon fds (most sampled) {most_fds}, RSS {int(rss) // 1024} MB")
PY
echo "took $(($(date +%s) - start)) s"
