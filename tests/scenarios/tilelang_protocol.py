#!/usr/bin/env python3
"""A stand-in for TileLang's kernel cache, following its save and load protocol.

save: every file is written as a temp file in CACHE/tmp/, os.replace'd into
      CACHE/<ns>/.staging/<key>_<pid>_<rand>/, then the staging directory is
      os.rename'd to CACHE/<ns>/kernels/<key>. EEXIST/ENOTEMPTY there means
      another process won the race.
load: all four files must exist; params.pkl is read; kernel_lib.so is mapped
      and checked against what params.pkl says it should be (a real loader
      would only notice at the first kernel launch); sources are not read.

Exit codes: save 0 published, 2 another writer won, 1 error;
            load 0 hit, 3 miss, 4 corrupt-load (files present, content bad).
Standard library only.
"""
import argparse
import errno
import hashlib
import mmap
import os
import pickle
import secrets
import shutil
import struct
import sys

FILES = ("device_kernel.cu", "host_kernel.cu", "kernel_lib.so", "params.pkl")
EXIT_HIT, EXIT_ERROR, EXIT_LOST, EXIT_MISS, EXIT_CORRUPT = 0, 1, 2, 3, 4


def elf_library(payload: bytes) -> bytes:
    """A 64-bit little-endian ELF shared-object header followed by payload:
    enough to look like a host library without CUDA images."""
    ident = b"\x7fELF" + bytes([2, 1, 1, 0]) + bytes(8)
    header = ident + struct.pack("<HHIQQQIHHHHHH", 3, 62, 1, 0, 0, 0, 0, 64, 0, 0, 0, 0, 0)
    return header + payload


def contents(key: str, variant: str, lib_size: int) -> dict:
    seed = hashlib.sha256(f"{key}/{variant}".encode()).digest()
    payload = (seed * (lib_size // len(seed) + 1))[: max(lib_size - 64, 0)]
    lib = elf_library(payload)
    params = {"key": key, "variant": variant, "lib_size": len(lib),
              "lib_sha256": hashlib.sha256(lib).hexdigest()}
    return {
        "device_kernel.cu": f"// device kernel {key} {variant}\n__global__ void k() {{}}\n".encode(),
        "host_kernel.cu": f"// host launcher {key} {variant}\nint launch() {{ return 0; }}\n".encode(),
        "kernel_lib.so": lib,
        "params.pkl": pickle.dumps(params),
    }


def write_temp(cache: str, data: bytes) -> str:
    tmp_dir = os.path.join(cache, "tmp")
    os.makedirs(tmp_dir, exist_ok=True)
    path = os.path.join(tmp_dir, f"tmp_{os.getpid()}_{secrets.token_hex(6)}")
    with open(path, "wb") as f:
        f.write(data)
    return path


def save(cache: str, ns: str, key: str, variant: str, lib_size: int) -> int:
    staging_root = os.path.join(cache, ns, ".staging")
    kernels = os.path.join(cache, ns, "kernels")
    os.makedirs(staging_root, exist_ok=True)
    os.makedirs(kernels, exist_ok=True)
    staging = os.path.join(staging_root, f"{key}_{os.getpid()}_{secrets.token_hex(6)}")
    os.mkdir(staging)
    for name, data in contents(key, variant, lib_size).items():
        os.replace(write_temp(cache, data), os.path.join(staging, name))
    try:
        os.rename(staging, os.path.join(kernels, key))
    except OSError as e:
        if e.errno in (errno.EEXIST, errno.ENOTEMPTY):
            shutil.rmtree(staging, ignore_errors=True)
            print("lost: another writer published first")
            return EXIT_LOST
        raise
    print("saved")
    return EXIT_HIT


def load(cache: str, ns: str, key: str) -> int:
    entry = os.path.join(cache, ns, "kernels", key)
    if not all(os.path.exists(os.path.join(entry, name)) for name in FILES):
        print("miss")
        return EXIT_MISS
    try:
        with open(os.path.join(entry, "params.pkl"), "rb") as f:
            params = pickle.load(f)
        with open(os.path.join(entry, "kernel_lib.so"), "rb") as f:
            size = os.fstat(f.fileno()).st_size
            if size == 0:
                print("corrupt: empty kernel_lib.so")
                return EXIT_CORRUPT
            with mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as lib:
                digest = hashlib.sha256(lib).hexdigest()
    except FileNotFoundError:
        print("miss")  # hidden between the existence check and the open
        return EXIT_MISS
    except (pickle.UnpicklingError, EOFError, ValueError, KeyError, AttributeError) as e:
        print(f"corrupt: params.pkl: {e}")
        return EXIT_CORRUPT
    if not isinstance(params, dict) or params.get("lib_size") != size or params.get("lib_sha256") != digest:
        print("corrupt: kernel_lib.so does not match params.pkl")
        return EXIT_CORRUPT
    print("hit")
    return EXIT_HIT


def main(argv) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    for name in ("save", "load"):
        p = sub.add_parser(name)
        p.add_argument("cache")
        p.add_argument("key")
        p.add_argument("--ns", default="ns")
        if name == "save":
            p.add_argument("--variant", default="v1")
            p.add_argument("--lib-size", type=int, default=4096)
    args = parser.parse_args(argv)
    try:
        if args.command == "save":
            return save(args.cache, args.ns, args.key, args.variant, args.lib_size)
        return load(args.cache, args.ns, args.key)
    except OSError as e:
        print(f"error: {e}", file=sys.stderr)
        return EXIT_ERROR


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
