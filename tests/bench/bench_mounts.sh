# Sourced by the close benchmarks (large_read_bench.sh uses its median only): the same three (or four) directories in
# one run, so every figure is a ratio within it. Sets WORK, columns and
# names: plain (a plain directory), bm (bindfs over bb), sm (sealfs over sb,
# durability=none so publish fsyncs hide nothing), with WITH_NO_OPEN=1 nm
# (the same build with -o no_open over nb) and, with BEFORE=BINARY, pm
# (another sealfs build over pb), all under BENCH_TMP (default /tmp; a tmpfs
# leaves the backing filesystem's inode allocation out). Unmounts and removes
# WORK at exit.
# Usage: bench_mounts NAME SEALFS_BINARY
bench_mounts() {
  WORK=$(mktemp -d "${BENCH_TMP:-/tmp}/$1.XXXXXX")
  mkdir -p "$WORK"/{plain,bb,bm,sb,sm,nb,nm,pb,pm}
  trap bench_cleanup EXIT
  bindfs "$WORK/bb" "$WORK/bm"
  "$2" -o profile=generic,durability=none "$WORK/sb" "$WORK/sm"
  columns=(plain bm sm)
  names=(plain bindfs sealfs)
  if [[ -n ${WITH_NO_OPEN:-} ]]; then
    "$2" -o profile=generic,durability=none,no_open "$WORK/nb" "$WORK/nm"
    columns+=(nm)
    names+=(no_open)
  fi
  if [[ -n ${BEFORE:-} ]]; then
    "$BEFORE" -o profile=generic,durability=none "$WORK/pb" "$WORK/pm"
    columns+=(pm)
    names+=(before)
  fi
}

bench_unmount() { fusermount3 -u "$1" 2>/dev/null || umount "$1" 2>/dev/null || true; }
bench_cleanup() {
  for m in bm sm nm pm; do bench_unmount "$WORK/$m"; done
  rm -rf "$WORK"
}

# The median of the numbers on stdin, one per line (the mean of the middle
# two for an even count).
median() { sort -g | awk '{a[NR] = $1} END {print (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2}'; }
