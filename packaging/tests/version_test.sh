#!/bin/sh
# `sealfs --version` against what else names the version (issue 27 point 2):
# its first line is "sealfs VERSION" with CMake's project() version, which
# every man page's .TH footer and packaging/debian/changelog's latest entry
# also name (the .deb takes its version from the same place; the .deb test
# runs --version of the installed binary too); its commit line names the
# source tree's HEAD when built from a git checkout; its libfuse and OpenSSL
# lines name the libraries the binary actually loads.
# usage: version_test.sh SEALFS_BINARY PROJECT_VERSION SOURCE_DIR
set -u
bin=$1 version=$2 src=$3
fail() { echo "FAIL: $*"; exit 1; }

out=$("$bin" --version) || fail "sealfs --version exited $?: $out"
echo "$out" | sed 's/^/   /'
[ "$(echo "$out" | sed -n 1p)" = "sealfs $version" ] || fail "first line is not 'sealfs $version'"

for page in "$src"/man/*.8; do
  grep -q "^\.TH .* \"sealfs $version\" " "$page" || fail "$page: .TH does not name sealfs $version"
done
head -1 "$src/packaging/debian/changelog" | grep -q "^sealfs ($version) " ||
  fail "packaging/debian/changelog's latest entry is not $version"

commit=$(echo "$out" | sed -n 's/^commit: //p')
if git -C "$src" rev-parse --verify -q HEAD >/dev/null 2>&1; then
  head=$(git -C "$src" rev-parse HEAD)
  case $commit in
    "$head" | "$head-modified") ;;
    *) fail "commit line '$commit', but the sources are at $head" ;;
  esac
else
  [ "$commit" = unknown ] || fail "commit line '$commit' without a git checkout"
fi

# The libraries the binary loads, by their file names (libfuse3.so.3.14.0,
# libcrypto.so.3 from libssl3 3.0.x): the version printed is theirs.
fuse=$(echo "$out" | sed -n 's/^libfuse: //p')
[ -n "$fuse" ] || fail "no libfuse line"
fuse_lib=$(ldd "$bin" | awk '/libfuse3\.so/ { print $3 }')
[ -n "$fuse_lib" ] || fail "ldd names no libfuse3"
case $(readlink -f "$fuse_lib") in
  *libfuse3.so."$fuse") ;;
  *) fail "libfuse line '$fuse', but the binary loads $(readlink -f "$fuse_lib")" ;;
esac
ssl=$(echo "$out" | sed -n 's/^OpenSSL: //p')
[ -n "$ssl" ] || fail "no OpenSSL line"
if command -v openssl >/dev/null; then
  # The openssl tool loads the same libcrypto (one libssl3 on the system).
  openssl version | grep -qF "OpenSSL $ssl " || fail "OpenSSL line '$ssl', but openssl version says: $(openssl version)"
fi
echo "ok   sealfs --version: $version, commit $commit, libfuse $fuse, OpenSSL $ssl"
