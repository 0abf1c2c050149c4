#!/bin/bash
# The sidecar image under podman, for real (rootful, runc):
#  1. the base image is made locally (mmdebstrap | podman import; no registry)
#     unless it is there already, and the image is built from
#     packaging/container/Dockerfile; its /usr/bin/sealfs passes the .deb's
#     hardening check (hardening_check.sh: PIE, RELRO, BIND_NOW, stack
#     protector, fortify, stripped) and its --version names the project's
#     version and the commit it was built from;
#  2. the sidecar mounts the view over the backing directory of a shared host
#     directory; an "app" container (uid 1000, given only the view with rslave
#     propagation) publishes an entry by TileLang's protocol and loads it;
#     a file planted in the backing directory stays hidden; the app's volume
#     is read-only, the FUSE mount propagated into it is not;
#  3. SIGKILL of the sidecar: the app only misses and cannot save (dead mount,
#     then, once detached, the empty read-only directory), never the raw cache;
#  4. the sidecar restarts (its entrypoint detaches the dead mount itself) and
#     the app, still running, sees the new mount and its entry;
#  5. `podman stop` leaves no mount on the host, and the app is back to the
#     empty directory;
#  6. in-place writes (R4): refused while the sidecar cannot see the app's
#     processes (its own pid namespace); with a shared pid namespace a
#     SIGKILLed writer's file stays hidden and a normal one survives a
#     sidecar restart.
# Outside CI, exits 77 (skipped) without root, /dev/fuse, podman, runc or
# mmdebstrap; with CI=true that fails.
# usage: container_test.sh SOURCE_DIR
# Environment: SEALFS_CONTAINER_BASE (default localhost/debian:12), the image
# both stages start from; made with mmdebstrap when missing;
# SEALFS_CONTAINER_IMAGE (default localhost/sealfs:container-test), the tag
# the image is built under.
set -u

source_dir=$(realpath "${1:?usage: container_test.sh SOURCE_DIR}")
base=${SEALFS_CONTAINER_BASE:-localhost/debian:12}
image=${SEALFS_CONTAINER_IMAGE:-localhost/sealfs:container-test}

missing=""
[ "$(id -u)" = 0 ] || missing="$missing root"
[ -c /dev/fuse ] || missing="$missing /dev/fuse"
for tool in podman runc mmdebstrap; do
  command -v "$tool" >/dev/null || missing="$missing $tool"
done
if [ -n "$missing" ]; then
  if [ "${CI:-}" = true ]; then
    echo "FAIL: CI must run this test, but it lacks:$missing (.ci/install-deps installs them)"
    exit 1
  fi
  echo "skipped: needs$missing"
  exit 77
fi

# crun fails on these hosts ("cgroups in hybrid mode not supported"), and the
# default rlimits exceed the host's hard limits (setrlimit: EPERM).
limits=(--ulimit nofile=20000:20000 --ulimit nproc=4096:4096)
pm() { podman --runtime "$(command -v runc)" "$@"; }

passes=0 failures=0
ok() { echo "ok   $1"; passes=$((passes + 1)); }
bad() { echo "FAIL $1"; failures=$((failures + 1)); }
check() {  # check NAME EXPECTED ACTUAL
  if [ "$2" = "$3" ]; then ok "$1"; else bad "$1: expected [$2], got [$3]"; fi
}
die() { echo "FAIL $*"; exit 1; }
phase_start=$(date +%s)
phase() {
  now=$(date +%s)
  echo "-- $1 (+$((now - phase_start)) s)"
}

# ---- 1. images ------------------------------------------------------------------
phase "base image $base"
if ! pm image exists "$base"; then
  echo "making $base with mmdebstrap (minbase bookworm)"
  mmdebstrap --quiet --variant=minbase bookworm - | pm import - "$base" >/dev/null ||
    die "mmdebstrap | podman import $base"
fi
phase "podman build"
commit=$(git -C "$source_dir" rev-parse --verify -q HEAD 2>/dev/null)
[ -z "$commit" ] || git -C "$source_dir" diff --quiet HEAD 2>/dev/null || commit="$commit-modified"
build_log=$(mktemp)
if ! pm build "${limits[@]}" -f "$source_dir/packaging/container/Dockerfile" \
       --ignorefile "$source_dir/packaging/container/Dockerfile.dockerignore" \
       --build-arg BASE="$base" --build-arg RUNTIME_BASE="$base" --build-arg SEALFS_COMMIT="$commit" \
       -t "$image" "$source_dir" >"$build_log" 2>&1; then
  tail -40 "$build_log"
  rm -f "$build_log"
  die "podman build"
fi
rm -f "$build_log"

# The image's binary: built like the package's, checked like it.
phase "the image's sealfs"
binary_dir=$(mktemp -d)
copy_from=$(pm create "$image") && pm cp "$copy_from:/usr/bin/sealfs" "$binary_dir/sealfs" >/dev/null
pm rm "$copy_from" >/dev/null 2>&1
if out=$(sh "$source_dir/packaging/tests/hardening_check.sh" "$binary_dir/sealfs" "the image's /usr/bin/sealfs"); then
  ok "${out#ok   }"
else
  bad "${out#FAIL: }"
fi
rm -rf "$binary_dir"
version=$(sed -n 's/^project(sealfs VERSION \([0-9.]*\).*/\1/p' "$source_dir/CMakeLists.txt")
image_version=$(pm run --rm "${limits[@]}" --network none --entrypoint sealfs "$image" --version)
check "the image's sealfs --version: version" "sealfs $version" "$(echo "$image_version" | sed -n 1p)"
check "the image's sealfs --version: commit" "commit: ${commit:-unknown}" "$(echo "$image_version" | sed -n 2p)"

# ---- the shared host directory and the containers ----------------------------------
work=$(mktemp -d /var/tmp/sealfs-container.XXXXXX)
vol=$work/vol
host_view=$vol/view/cache
sidecar=sealfs-test-sidecar-$$
app=sealfs-test-app-$$
mkdir -p "$vol"

fuse_mounts_under() {  # count of FUSE mounts at or below $1 in this namespace
  awk -v p="$1" '{ for (i = 7; $i != "-"; i++) ; if ($(i + 1) ~ /^fuse/ && ($5 == p || index($5, p "/") == 1)) n++ }
                 END { print n + 0 }' /proc/self/mountinfo
}
cleanup() {
  pm rm -f -t 0 "$sidecar" "$app" "sealfs-test-pidns-$$" >/dev/null 2>&1
  # Deepest first: a dead FUSE mount left by a failed check, then the bind.
  for m in $(awk -v p="$work" 'index($5, p) == 1 { print $5 }' /proc/self/mountinfo | sort -r); do
    umount -l "$m" 2>/dev/null
  done
  rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 1' INT TERM

# The host's / is a private mount: rshared does nothing until the source is
# itself a shared mount.
mount --bind "$vol" "$vol" && mount --make-rshared "$vol" || die "making $vol a shared mount"

# The sidecar: the whole volume; the entrypoint makes backing/ and view/cache.
start_sidecar() {  # start_sidecar [PODMAN-RUN-OPTION…]
  pm run -d --name "$sidecar" "${limits[@]}" --network none "$@" \
    --device /dev/fuse --cap-add SYS_ADMIN \
    --mount "type=bind,src=$vol,dst=/vol,bind-propagation=rshared" \
    -e SEALFS_OPTIONS=profile=tilelang,allow_other -e SEALFS_OWNER=1000:1000 \
    "$image" >/dev/null
}
wait_for() {  # wait_for SECONDS COMMAND...: until COMMAND succeeds
  local tries=$(($1 * 10))
  shift
  until "$@"; do
    [ "$tries" -gt 0 ] || return 1
    tries=$((tries - 1))
    sleep 0.1
  done
}
host_mounted() { [ "$(fuse_mounts_under "$host_view")" = 1 ]; }
# One mount that a daemon answers: right after a restart over a dead mount,
# the dead one still counts until the entrypoint's clear-stale detaches it.
# The kernel caches no extended attribute, so reading sealfs's status one
# reaches the daemon (a dead mount: ENOTCONN).
host_served() {
  host_mounted && python3 -c 'import os, sys; os.getxattr(sys.argv[1], "user.sealfs.status")' "$host_view" 2>/dev/null
}
host_unmounted() { [ "$(fuse_mounts_under "$vol")" = 0 ]; }

# The app: TileLang's save protocol in sh (temp file in tmp/, moved into
# .staging/<key>_<pid>/, the staging directory renamed to kernels/<key>) and
# its load (all four files there, params as written). A real host library
# stands for kernel_lib.so (no CUDA images: the validator accepts it).
app_script='
cache=/sealfs/cache ns=/sealfs/cache/demo
save() {
  mkdir -p "$cache/tmp" "$ns/.staging" "$ns/kernels" || return 1
  staging=$ns/.staging/$1_$$
  mkdir "$staging" || return 1
  for f in device_kernel.cu host_kernel.cu params.pkl; do
    printf "%s %s\n" "$1" "$f" > "$cache/tmp/tmp_$$" && mv "$cache/tmp/tmp_$$" "$staging/$f" || return 1
  done
  set -- "$1" /usr/lib/*-linux-gnu/libfuse3.so.3
  cp "$2" "$cache/tmp/tmp_$$" && mv "$cache/tmp/tmp_$$" "$staging/kernel_lib.so" || return 1
  mv "$staging" "$ns/kernels/$1"
}
load() {
  for f in device_kernel.cu host_kernel.cu kernel_lib.so params.pkl; do
    [ -f "$ns/kernels/$1/$f" ] || return 3
  done
  [ "$(cat "$ns/kernels/$1/params.pkl")" = "$1 params.pkl" ] || return 4
}
"$@"
'
in_app() { pm exec "$app" sh -c "$app_script" app "$@"; }
# What the app can see of the cache, one word: mounted (FUSE on top, answers),
# dead (FUSE on top, ENOTCONN or no answer), empty (the bare directory,
# nothing in it) or raw (anything else: it would be the unguarded cache).
app_view() {
  pm exec "$app" sh -c '
    if grep -q " /sealfs/cache .* - fuse" /proc/self/mountinfo; then
      if timeout 5 ls /sealfs/cache >/dev/null 2>&1; then echo mounted; else echo dead; fi
    elif [ -z "$(ls -A /sealfs/cache)" ]; then echo empty
    else echo raw; fi'
}
# The app must only miss: no raw view, the entry does not load, no save.
check_only_misses() {  # check_only_misses WHAT EXPECTED_VIEW
  check "$1: the app's view" "$2" "$(app_view)"
  in_app load k1 2>/dev/null
  check "$1: the published entry is a miss" 3 $?
  if in_app save k9 2>/dev/null; then bad "$1: a save succeeded"; else ok "$1: a save fails"; fi
  if pm exec --user 0 "$app" touch /sealfs/cache/by-root 2>/dev/null; then
    bad "$1: root in the app could write"
  else
    ok "$1: root in the app cannot write either"
  fi
  check "$1: nothing written into the view's directory" "" "$(ls -A "$vol/view" | grep -v '^cache$')"
}

# ---- 2. publish and load through the view --------------------------------------------
phase "sidecar and app"
start_sidecar || die "podman run (sidecar)"
wait_for 30 host_mounted || { pm logs "$sidecar"; die "the sidecar's mount did not reach the host"; }
check "backing directory owned by SEALFS_OWNER" 1000:1000 "$(stat -c %u:%g "$vol/backing")"
echo "raw bytes" > "$vol/backing/planted.txt"  # behind the mount's back: hidden (R3)

pm run -d --name "$app" "${limits[@]}" --network none --user 1000:1000 \
  --mount "type=bind,src=$vol/view,dst=/sealfs,ro=true,bind-propagation=rslave" \
  --entrypoint sleep "$image" infinity >/dev/null || die "podman run (app)"
check "the app sees the mount" mounted "$(app_view)"
pm exec "$app" test -e /sealfs/backing
check "the app has no backing directory" 1 $?
in_app load k1; check "first load is a miss" 3 $?
in_app save k1; check "the app (uid 1000) saves" 0 $?
in_app load k1; check "then loads its entry" 0 $?
check "the entry is sealed in the backing directory" 1 \
  "$(find "$vol/backing/demo/kernels/k1" -name .sealfs-manifest | wc -l)"
check "saved files belong to the app's uid" 1000 "$(stat -c %u "$vol/backing/demo/kernels/k1/params.pkl")"
check "the planted file is hidden from the app" "" "$(pm exec "$app" ls /sealfs/cache | grep planted)"

# ---- 3. SIGKILL: the app only misses ---------------------------------------------------
phase "SIGKILL"
pm kill -s KILL "$sidecar" >/dev/null
pm wait "$sidecar" >/dev/null 2>&1
check "a dead mount stays on the host (nothing left to unmount)" 1 "$(fuse_mounts_under "$host_view")"
check_only_misses "after SIGKILL" dead
# What the restarted sidecar does first, here alone: the detach propagates
# from a container to the host and into the app.
pm run --rm "${limits[@]}" --network none --device /dev/fuse --cap-add SYS_ADMIN \
  --mount "type=bind,src=$vol,dst=/vol,bind-propagation=rshared" \
  --entrypoint /usr/libexec/sealfs/sealfs-mountctl "$image" clear-stale /vol/view/cache
check "clear-stale from a container" 0 $?
check "no mount left on the host" 0 "$(fuse_mounts_under "$vol")"
check_only_misses "detached" empty
check "the empty view is root's, mode 555" "0:0 555" "$(stat -c '%u:%g %a' "$host_view")"

# ---- 4. restart: the running app sees the new mount ------------------------------------
phase "restart"
pm start "$sidecar" >/dev/null || die "podman start (sidecar)"
wait_for 30 host_mounted || { pm logs "$sidecar"; die "no mount after the restart"; }
check "the app sees the new mount" mounted "$(app_view)"
in_app load k1; check "the entry published before the crash loads" 0 $?
in_app save k2; check "the app saves again" 0 $?
# Again SIGKILL, and this time the restart alone detaches the dead mount.
pm kill -s KILL "$sidecar" >/dev/null
pm wait "$sidecar" >/dev/null 2>&1
check_only_misses "second SIGKILL" dead
pm start "$sidecar" >/dev/null || die "podman start over a dead mount"
wait_for 30 host_served || { pm logs "$sidecar"; die "no mount after the second restart"; }
check "one mount on the host, not two" 1 "$(fuse_mounts_under "$vol")"
check "the app sees the mount once more" mounted "$(app_view)"
in_app load k2; check "the second entry loads" 0 $?
check "the planted file is still hidden" "" "$(pm exec "$app" ls /sealfs/cache | grep planted)"

# ---- 5. stop: no mount behind ------------------------------------------------------
phase "stop"
pm stop -t 30 "$sidecar" >/dev/null
check "the sidecar's exit status after SIGTERM" 0 "$(pm inspect -f '{{.State.ExitCode}}' "$sidecar")"
check "no FUSE mount left on the host" 0 "$(fuse_mounts_under "$vol")"
check "the app is back to the empty view" empty "$(app_view)"
check "the backing directory keeps both entries" "k1 k2" "$(ls "$vol/backing/demo/kernels" | xargs)"

# ---- 6. in-place writes and the writer's pid namespace (DESIGN.md R4) -----------------
# Without a shared pid namespace the sidecar is sent pid 0 for the app's
# tasks: it cannot tell a killed writer from one that closed, so in-place
# writes outside volatile areas are refused (EPERM) while saving by rename
# works. With one (the pod's shareProcessNamespace; here a holder container
# whose pid namespace both join, as a pod's infra container does, so that a
# sidecar restart does not end it) and SYS_PTRACE to read the app's /proc,
# a SIGKILLed writer's partial file is never served and a normal in-place
# write survives a restart of the sidecar.
phase "pid namespaces: not shared"
pm rm -f -t 0 "$sidecar" >/dev/null
start_sidecar || die "podman run (sidecar, own pid namespace)"
wait_for 30 host_mounted || { pm logs "$sidecar"; die "no mount (own pid namespace)"; }
in_place='exec 3>"$1"; i=0; while [ $i -lt 1000 ]; do printf "%0500d" 0 >&3; i=$((i + 1)); done; [ -z "${2:-}" ] || kill -9 $$'
if pm exec "$app" sh -c "$in_place" app /sealfs/cache/demo/whole.bin 2>/dev/null; then
  bad "unseen writer: an in-place write is refused"
else
  ok "unseen writer: an in-place write is refused"
fi
pm exec "$app" sh -c "$in_place" app /sealfs/cache/demo/victim.bin kill 2>/dev/null
pm exec "$app" test -e /sealfs/cache/demo/victim.bin
check "unseen writer: nothing of a killed writer is visible" 1 $?
in_app save k3; check "unseen writer: saving by rename works" 0 $?
refused=$(pm exec "$sidecar" sealfs status /vol/view/cache | sed -n 's/.*"unseen_writes_refused":\([0-9]*\).*/\1/p')
if [ "${refused:-0}" -ge 2 ]; then ok "unseen writer: refusals counted ($refused)"; else bad "unseen writer: refusals counted: [$refused]"; fi
pm stop -t 30 "$sidecar" >/dev/null
pm rm -f -t 0 "$app" >/dev/null

phase "pid namespaces: shared"
holder=sealfs-test-pidns-$$
pm run -d --name "$holder" "${limits[@]}" --network none --entrypoint sleep "$image" infinity >/dev/null ||
  die "podman run (pid namespace holder)"
pm rm -f -t 0 "$sidecar" >/dev/null
start_sidecar --pid "container:$holder" --cap-add SYS_PTRACE || die "podman run (sidecar, shared pid namespace)"
wait_for 30 host_mounted || { pm logs "$sidecar"; die "no mount (shared pid namespace)"; }
pm run -d --name "$app" "${limits[@]}" --network none --user 1000:1000 --pid "container:$holder" \
  --mount "type=bind,src=$vol/view,dst=/sealfs,ro=true,bind-propagation=rslave" \
  --entrypoint sleep "$image" infinity >/dev/null || die "podman run (app, shared pid namespace)"
pm exec "$app" sh -c "$in_place" app /sealfs/cache/demo/victim.bin kill
check "shared: the writer was SIGKILLed mid-write" 137 $?
app_lacks() { ! pm exec "$app" test -e "$1"; }
wait_for 10 app_lacks /sealfs/cache/demo/victim.bin
check "shared: the killed writer's file is hidden" 0 $?
pm exec "$app" sh -c "$in_place" app /sealfs/cache/demo/whole.bin
check "shared: an in-place write closes normally" 0 $?
check "shared: its size" 500000 "$(pm exec "$app" stat -c %s /sealfs/cache/demo/whole.bin)"
pm stop -t 30 "$sidecar" >/dev/null
pm start "$sidecar" >/dev/null || die "podman start (sidecar, shared pid namespace)"
wait_for 30 host_mounted || { pm logs "$sidecar"; die "no mount after the restart (shared pid namespace)"; }
check "shared: after a sidecar restart the in-place write is there" 500000 \
  "$(pm exec "$app" stat -c %s /sealfs/cache/demo/whole.bin 2>&1)"
pm exec "$app" test -e /sealfs/cache/demo/victim.bin
check "shared: after a sidecar restart the killed writer's file is still hidden" 1 $?
check "shared: the killed writer's file is in quarantine" 1 \
  "$(find "$vol/backing/.sealfs/quarantine" -name victim.bin | wc -l)"
pm stop -t 30 "$sidecar" >/dev/null
# The containers that joined the holder's pid namespace go first.
pm rm -f -t 0 "$app" "$sidecar" >/dev/null 2>&1
pm rm -f -t 0 "$holder" >/dev/null

phase "done"
echo "$passes passed, $failures failed"
[ "$failures" -eq 0 ]
