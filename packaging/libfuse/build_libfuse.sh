#!/usr/bin/env bash
# Builds libfuse 3.17.2 from Debian trixie's own source package (fuse3) into
# a prefix inside the build tree, for the `passthrough` preset: Debian 12
# packages libfuse 3.14, which has no FUSE passthrough API (3.16/3.17 added
# fuse_passthrough_open). The system's apt sources are not touched: apt reads
# a private source list and keeps its lists under the work directory.
#
#   packaging/libfuse/build_libfuse.sh [WORK_DIR]   (default build/libfuse-3.17)
#
# Leaves WORK_DIR/prefix (include/, lib/, lib/pkgconfig/fuse3.pc) and does
# nothing when that prefix is already there. Needs apt-get, dpkg-source
# (dpkg-dev), meson, ninja and a C compiler (.ci/install-deps installs them).
# The mirror is the one the system's own apt sources name (SEALFS_DEBIAN_MIRROR
# overrides it).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
work="${1:-$root/build/libfuse-3.17}"
mkdir -p "$work"
work="$(cd "$work" && pwd)"
prefix="$work/prefix"
version=3.17.2
pc="$prefix/lib/pkgconfig/fuse3.pc"

if [[ -f "$pc" ]]; then
  echo "libfuse $version already built in $prefix"
  exit 0
fi

mirror="${SEALFS_DEBIAN_MIRROR:-}"
if [[ -z "$mirror" ]]; then
  mirror="$(grep -hoE '^URIs:[[:space:]]*[^[:space:]]+/debian/?([[:space:]]|$)' \
    /etc/apt/sources.list.d/*.sources 2>/dev/null | head -n1 | awk '{print $2}' || true)"
fi
if [[ -z "$mirror" ]]; then
  mirror="$(grep -hoE '^deb[[:space:]]+(\[[^]]*\][[:space:]]+)?[^[:space:]]+/debian/?[[:space:]]' \
    /etc/apt/sources.list 2>/dev/null | head -n1 | awk '{print $NF}' || true)"
fi
mirror="${mirror:-http://deb.debian.org/debian}"
mirror="${mirror%/}"

src="$work/src"
rm -rf "$src" "$work/lists" "$work/build"
mkdir -p "$src" "$work/lists/partial"
echo "deb-src $mirror trixie main" >"$work/src.list"
apt_private=(-o "Dir::Etc::SourceList=$work/src.list" -o Dir::Etc::SourceParts=/dev/null
  -o "Dir::State::Lists=$work/lists")
echo "== libfuse $version: fuse3 source package from $mirror (trixie)"
apt-get "${apt_private[@]}" update
(cd "$src" && apt-get "${apt_private[@]}" source --download-only fuse3)
dsc="$(ls "$src"/fuse3_*.dsc | head -n1)"
# apt checked every file against the archive's signed Sources index, and
# dpkg-source checks them against the .dsc again (it warns that it cannot
# check the uploader's signature: no debian-keyring here) and applies
# Debian's patches (3.17.2-3: the want/want_ext conversion fixes among them).
dpkg-source -x "$dsc" "$src/fuse3"

# The library only: no examples, utilities (fusermount3 stays the system's,
# setuid, from Debian 12's fuse3), tests or udev rules.
meson setup "$work/build" "$src/fuse3" --prefix="$prefix" --libdir=lib --buildtype=release \
  -Dexamples=false -Dutils=false -Dtests=false -Duseroot=false -Ddisable-mtab=true \
  -Dudevrulesdir="$prefix/udev"
ninja -C "$work/build" -j "${SEALFS_LIBFUSE_JOBS:-$(nproc)}"
ninja -C "$work/build" install
got="$(sed -n 's/^Version: //p' "$pc")"
echo "== libfuse $got installed in $prefix"
if [[ "$got" != "$version" ]]; then
  echo "build_libfuse.sh: trixie's fuse3 is now $got, not $version: check the passthrough build against it" >&2
fi
