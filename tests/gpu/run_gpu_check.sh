#!/bin/bash
# CUDA driver validation on a machine with an NVIDIA GPU and driver.
#
# Builds what it needs (cmake: sealfs_core, driver_check, and the sealfs
# command when its dependencies are there; falls back to compiling the CUDA
# sources directly if the project cannot be configured), makes sound and
# corrupted images (fresh from nvcc for this GPU when nvcc exists, else from
# tests/fixtures/cuda), and shows that:
#   - sound images load in the driver and the validator says "loaded";
#   - corrupted images handed straight to the driver are refused with
#     CUDA_ERROR_INVALID_IMAGE (200) / CUDA_ERROR_INVALID_PTX (218);
#   - the validator in driver mode rejects corrupted images;
#   - `sealfs cuda-check --mode driver` exits 0 on sound and 1 on broken files.
# Prints PASS/FAIL lines and a summary; exit 0 only when nothing failed.
# Usage: tests/gpu/run_gpu_check.sh [BUILD_DIR]   (env: JOBS, NVCC)
set -u
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
BUILD=${1:-$ROOT/build/gpu}
JOBS=${JOBS:-16}
FIX=$ROOT/tests/fixtures/cuda
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
passes=0
failures=0
pass() { echo "PASS: $*"; passes=$((passes + 1)); }
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }
info() { echo "INFO: $*"; }
start=$(date +%s)

# ---- 0. the machine ------------------------------------------------------------
if command -v nvidia-smi >/dev/null 2>&1; then
  info "$(nvidia-smi --query-gpu=name,compute_cap,driver_version --format=csv,noheader | head -1)"
else
  info "nvidia-smi not found"
fi

# ---- 1. build --------------------------------------------------------------------
DRIVER_CHECK=""
SEALFS=""
generator=()
command -v ninja >/dev/null 2>&1 && generator=(-G Ninja)
if cmake -S "$ROOT" -B "$BUILD" "${generator[@]}" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSEALFS_BUILD_TESTS=ON \
     -DSEALFS_WITH_CUDA_HEADERS=ON >"$WORK/cmake.log" 2>&1 &&
   cmake --build "$BUILD" -j"$JOBS" --target driver_check >"$WORK/build.log" 2>&1; then
  DRIVER_CHECK=$BUILD/tests/gpu/driver_check
  if cmake --build "$BUILD" -j"$JOBS" --target sealfs >>"$WORK/build.log" 2>&1; then
    SEALFS=$BUILD/fs/sealfs
  else
    info "the sealfs command did not build here; checking through driver_check only"
  fi
  pass "cmake build of driver_check"
else
  info "cmake build failed (see below); compiling the CUDA sources directly"
  tail -5 "$WORK/cmake.log" "$WORK/build.log" 2>/dev/null
  srcs=("$ROOT"/core/cuda_*.cpp "$ROOT"/core/elf_reader.cpp "$ROOT"/core/fatbin.cpp "$ROOT"/core/ptx_text.cpp)
  if ${CXX:-c++} -std=c++20 -O2 -D_GNU_SOURCE -I"$ROOT" "${srcs[@]}" "$ROOT"/core/validator.cpp \
       "$ROOT"/tests/gpu/driver_check.cpp -ldl -lpthread -o "$WORK/driver_check"; then
    DRIVER_CHECK=$WORK/driver_check
    pass "direct build of driver_check"
  else
    fail "could not build driver_check"
    echo "SUMMARY: $passes passed, $failures failed"
    exit 1
  fi
fi

# ---- 2. images ---------------------------------------------------------------------
NVCC=${NVCC:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}
cc=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -1 | tr -d ' .')
if [ -x "$NVCC" ] && [ -n "$cc" ]; then
  info "building images for sm_$cc with $NVCC"
  "$NVCC" -cubin -arch=sm_"$cc" -o "$WORK/sound.cubin" "$FIX/kernel.cu" &&
    "$NVCC" -fatbin -gencode arch=compute_"$cc",code="[sm_$cc,compute_$cc]" -o "$WORK/sound.fatbin" "$FIX/kernel.cu" &&
    "$NVCC" -ptx -arch=sm_"$cc" -o "$WORK/sound.ptx" "$FIX/kernel.cu" &&
    "$NVCC" -shared -Xcompiler -fPIC -cudart shared -gencode arch=compute_"$cc",code="[sm_$cc,compute_$cc]" \
      -o "$WORK/kernel_lib.so" "$FIX/kernel.cu" || fail "nvcc could not build the images"
else
  info "no nvcc (or no GPU query): using the committed fixtures"
  cp "$FIX/kernel_multi.fatbin" "$WORK/sound.fatbin"
  cp "$FIX/kernel_sm80.ptx" "$WORK/sound.ptx"
  cp "$FIX/kernel_lib.so" "$WORK/kernel_lib.so"
  cp "$FIX/kernel_sm80.cubin" "$WORK/sound.cubin"  # may be "no binary for this GPU": not damage
fi

# Corruptions that keep the file's length and leave every header offset
# inside the file (a crashed writer's zero-filled tail, a lost magic), so a
# raw load, which gives the driver no length, never reads past the buffer.
corrupt() {  # corrupt SRC DST OFFSET COUNT BYTE
  cp "$1" "$2"
  head -c "$4" /dev/zero | tr '\0' "\\$5" | dd of="$2" bs=1 seek="$3" conv=notrunc status=none
}
size_of() { stat -c %s "$1"; }
cubin_half=$(( $(size_of "$WORK/sound.cubin") / 2 ))
fat_half=$(( $(size_of "$WORK/sound.fatbin") / 2 ))
corrupt "$WORK/sound.cubin" "$WORK/zero_tail.cubin" "$cubin_half" "$cubin_half" 000
corrupt "$WORK/sound.cubin" "$WORK/bad_magic.cubin" 0 4 000          # no ELF magic
corrupt "$WORK/sound.fatbin" "$WORK/zero_tail.fatbin" "$fat_half" "$fat_half" 000
corrupt "$WORK/sound.cubin" "$WORK/middle.cubin" 1024 256 125         # 0x55 in the middle: a probe
printf '.version 8.0\n.target sm_90\n.address_size 64\n.visible .entry k() {\n  bogus.instruction %%r1;\n  ret;\n}\n' \
  >"$WORK/bad.ptx"
lib_size=$(size_of "$WORK/kernel_lib.so")
head -c $(( lib_size * 3 / 4 )) "$WORK/kernel_lib.so" >"$WORK/truncated_kernel_lib.so"

# ---- 3. the driver itself ------------------------------------------------------------
timeout 120 "$DRIVER_CHECK" raw-loads:"$WORK/sound.cubin" raw-loads:"$WORK/sound.fatbin" raw-loads:"$WORK/sound.ptx" \
  raw-invalid:"$WORK/zero_tail.cubin" raw-invalid:"$WORK/bad_magic.cubin" raw-invalid:"$WORK/bad.ptx" \
  raw-probe:"$WORK/zero_tail.fatbin" raw-probe:"$WORK/middle.cubin" \
  sound:"$WORK/sound.fatbin" sound:"$WORK/kernel_lib.so" \
  broken:"$WORK/zero_tail.cubin" broken:"$WORK/bad_magic.cubin" broken:"$WORK/zero_tail.fatbin" \
  broken:"$WORK/bad.ptx" broken:"$WORK/truncated_kernel_lib.so" >"$WORK/driver_check.out" 2>&1
rc=$?
cat "$WORK/driver_check.out"
passes=$((passes + $(grep -c '^PASS' "$WORK/driver_check.out")))
failures=$((failures + $(grep -c '^FAIL' "$WORK/driver_check.out")))
if [ "$rc" = 77 ]; then fail "no usable CUDA driver/device: nothing validated by the driver"; fi

# ---- 4. the command ----------------------------------------------------------------------
if [ -n "$SEALFS" ] && [ -x "$SEALFS" ]; then
  "$SEALFS" cuda-check --mode driver "$WORK/sound.fatbin" "$WORK/kernel_lib.so"
  rc=$?
  [ "$rc" = 0 ] && pass "sealfs cuda-check --mode driver on sound images exits 0" || fail "cuda-check on sound images exited $rc"
  "$SEALFS" cuda-check --mode driver "$WORK/truncated_kernel_lib.so" "$WORK/bad.ptx"
  rc=$?
  [ "$rc" = 1 ] && pass "sealfs cuda-check --mode driver on broken images exits 1" || fail "cuda-check on broken images exited $rc"
fi

echo "SUMMARY: $passes passed, $failures failed, $(( $(date +%s) - start )) s"
[ "$failures" = 0 ]
