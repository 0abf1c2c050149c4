"""Runs TileLang's own KernelCache (tilelang.cache.kernel_cache, from the
`tilelang` wheel, unmodified) inside the test's virtual environment:
`python tilelang_cache_driver.py < ops.json` prints one JSON object
{"results": [...], "log": ["LEVEL message", ...]}. The cache directory comes
from TILELANG_CACHE_DIR, as in any TileLang program.

As TileLang's own cache tests do, the kernel is a stand-in object with the
attributes the save path reads (kernel_source, adapter.get_kernel_source(),
adapter.libpath, params), and loading replaces only the final step that turns
the files into a JITKernel (_build_kernel, which needs a GPU toolchain): every
file check, integrity check and read before it is TileLang's own code.

ops: {"op": "paths"} → {"cache_root": …, "staging_root": …}
     {"op": "save", "key": K, "lib": path, "device_src": s, "host_src": s} → null
     {"op": "load", "key": K} → null on a miss, else {"lib_sha256": …, "params": [[dtype, shape]…]}
"""

import hashlib
import json
import logging
import sys
from types import SimpleNamespace

import tilelang  # noqa: F401  (puts its bundled tvm on sys.path)
import tvm
from tilelang.cache.kernel_cache import KernelCache
from tilelang.engine.param import KernelParam


class Collect(logging.Handler):
    def __init__(self):
        super().__init__(logging.WARNING)
        self.lines = []

    def emit(self, record):
        self.lines.append(f"{record.levelname} {record.getMessage()}")


def fake_kernel(op):
    adapter = SimpleNamespace(get_kernel_source=lambda: op["host_src"], libpath=op["lib"])
    params = [KernelParam(tvm.DataType("float32"), [16, 16]), KernelParam(tvm.DataType("int32"), [16])]
    return SimpleNamespace(kernel_source=op["device_src"], adapter=adapter, params=params)


def build_from_files(self, func, host_kernel_source, device_kernel_source, kernel_lib_path,
                     kernel_params, backend_context, out_idx, pass_configs, compile_flags):
    """Stands in for JITKernel.from_database: reads what it would load."""
    if not kernel_params:
        return None
    with open(kernel_lib_path, "rb") as f:
        lib_sha = hashlib.sha256(f.read()).hexdigest()
    # An object, as TileLang tags the loaded kernel with its key and path.
    return SimpleNamespace(lib_sha256=lib_sha,
                           params=[[str(p.dtype), [int(d) for d in p.shape]] for p in kernel_params])


def run(cache, op):
    kind = op["op"]
    if kind == "paths":
        return {"cache_root": KernelCache._get_cache_root(), "staging_root": KernelCache._get_staging_root()}
    if kind == "save":
        cache._save_kernel_to_disk(op["key"], fake_kernel(op))
        return None
    if kind == "load":
        kernel = cache._load_kernel_from_disk(op["key"], backend_context=None)
        return None if kernel is None else {"lib_sha256": kernel.lib_sha256, "params": kernel.params}
    raise ValueError(f"unknown op {kind}")


def main():
    collect = Collect()
    logging.getLogger("tilelang").addHandler(collect)
    KernelCache._build_kernel = build_from_files
    cache = KernelCache()
    results = [run(cache, op) for op in json.load(sys.stdin)]
    print(json.dumps({"results": results, "log": collect.lines}))


if __name__ == "__main__":
    main()
