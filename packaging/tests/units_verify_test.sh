#!/bin/sh
# Installs the packaging/ part of the build into a temporary prefix, next to
# the sealfs binary, and runs `systemd-analyze verify` on the configured
# sealfs@.service and the .mount example: unit syntax, known directives, and
# that every Exec*= program exists and is executable.
# usage: units_verify_test.sh PACKAGING_BUILD_DIR SEALFS_BINARY EXAMPLE_MOUNT_UNIT
set -eu
build=$1 sealfs=$2 mount_unit=$3
prefix=$(mktemp -d)
trap 'rm -rf "$prefix"' EXIT
# Component Unspecified: everything but /etc/sealfs, an absolute path.
cmake -DCMAKE_INSTALL_PREFIX="$prefix" -DCMAKE_INSTALL_COMPONENT=Unspecified -P "$build/cmake_install.cmake" >/dev/null
mkdir -p "$prefix/bin" "$prefix/units"
cp "$sealfs" "$prefix/bin/sealfs"
unit=$(find "$prefix" -name 'sealfs@.service')
[ -n "$unit" ] || { echo "FAIL: sealfs@.service not installed"; exit 1; }
grep -q "^ExecStart=$prefix/bin/sealfs -f " "$unit" || { echo "FAIL: ExecStart does not name $prefix/bin/sealfs"; exit 1; }
cp "$unit" "$mount_unit" "$prefix/units/"
cd "$prefix/units"
# verify prints problems and exits non-zero on them; the instance name needs
# no config file to be verified (ConditionPathExists= is checked at start).
out=$(systemd-analyze verify --man=no ./sealfs@example.service "./$(basename "$mount_unit")" 2>&1) || {
  echo "FAIL: systemd-analyze verify"; echo "$out"; exit 1; }
[ -z "$out" ] || { echo "FAIL: systemd-analyze verify warned:"; echo "$out"; exit 1; }
echo "units verified"
