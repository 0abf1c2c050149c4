"""The console scripts `sealfs` and `sealfs-mountctl`: each replaces the
Python process with the program the wheel carries (bin/sealfs, whose RPATH
finds the vendored libraries in sealfs.libs/; libexec/sealfs-mountctl, a
POSIX sh script)."""

import os
import stat
import sys

_HERE = os.path.dirname(os.path.abspath(__file__))


def _exec(path, argv):
    try:
        mode = os.stat(path).st_mode
        if not mode & stat.S_IXUSR and os.access(path, os.W_OK):
            os.chmod(path, mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
        os.execv(path, argv)
    except OSError as e:
        sys.exit("sealfs: cannot run %s: %s" % (path, e.strerror))


def main():
    _exec(os.path.join(_HERE, "bin", "sealfs"), ["sealfs"] + sys.argv[1:])


def mountctl():
    script = os.path.join(_HERE, "libexec", "sealfs-mountctl")
    _exec("/bin/sh", ["sh", script] + sys.argv[1:])
