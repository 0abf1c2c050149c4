#!/bin/sh
# The hardening of a shipped sealfs binary, read with readelf: what
# dpkg-buildflags' hardening=+all and dh_strip give a Debian package (the
# `package` preset): PIE, RELRO, BIND_NOW, a stack protector, fortified
# calls (_FORTIFY_SOURCE), stripped. One check for every shipped binary: the
# .deb's (deb_package_test.sh) and the container image's (container_test.sh).
# Prints one ok line, or FAIL and the first missing property (exit 1).
# usage: hardening_check.sh BINARY [WHAT]
bin=$1
what=${2:-$1}
fail() { echo "FAIL: $what: $*"; exit 1; }
[ -f "$bin" ] || fail "no such file"
readelf -hW "$bin" | grep -q 'Type:.*DYN' || fail "not PIE"
readelf -lW "$bin" | grep -q 'GNU_RELRO' || fail "no RELRO segment"
readelf -dW "$bin" | grep -Eq 'BIND_NOW|FLAGS_1.* NOW' || fail "not linked with -z now"
syms=$(readelf --dyn-syms -W "$bin")
echo "$syms" | grep -q '__stack_chk_fail' || fail "no stack protector"
echo "$syms" | grep -v '__stack_chk_fail' | grep -Eq ' __[a-z0-9_]+_chk(@| |$)' ||
  fail "calls no fortified function (_FORTIFY_SOURCE)"
readelf -SW "$bin" | grep -Eq ' \.(symtab|debug_[a-z]+|comment) ' && fail "not stripped"
echo "ok   $what: hardened and stripped: PIE, RELRO, BIND_NOW, stack protector, fortify"
