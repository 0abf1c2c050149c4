"""Runs Triton's own FileCacheManager, unchanged, inside the test's virtual
environment: `python triton_cache_driver.py < ops.json` (a JSON list of ops on stdin)
prints one JSON list of results. The cache directory comes from TRITON_CACHE_DIR, as in
any Triton program.

ops: {"op": "put", "key": K, "name": N, "data": base64} → path, or {"errno": e}
         when the publish fails (a content validator refused it)
     {"op": "get_file", "key": K, "name": N} → {"path": p or null, "data": base64 or null}
     {"op": "put_group", "key": K, "name": N, "group": {child: path}} → path
     {"op": "get_group", "key": K, "name": N} → {child: path} or null
     {"op": "hammer_put", "key": K, "name": N, "datas": [base64…], "rounds": R} → rounds done
     {"op": "hammer_get", "key": K, "name": N, "rounds": R} → list of distinct contents read
"""

import base64
import json
import sys

from triton.runtime.cache import FileCacheManager


def b64(data):
    return base64.b64encode(data).decode()


def read_or_none(path):
    if path is None:
        return None
    with open(path, "rb") as f:
        return f.read()


def run(op):
    cache = FileCacheManager(op["key"])
    kind = op["op"]
    if kind == "put":
        try:
            return cache.put(base64.b64decode(op["data"]), op["name"], binary=True)
        except OSError as e:
            return {"errno": e.errno}
    if kind == "get_file":
        path = cache.get_file(op["name"])
        data = read_or_none(path)
        return {"path": path, "data": None if data is None else b64(data)}
    if kind == "put_group":
        return cache.put_group(op["name"], op["group"])
    if kind == "get_group":
        return cache.get_group(op["name"])
    if kind == "hammer_put":
        datas = [base64.b64decode(d) for d in op["datas"]]
        for i in range(op["rounds"]):
            cache.put(datas[i % len(datas)], op["name"], binary=True)
        return op["rounds"]
    if kind == "hammer_get":
        seen = set()
        for _ in range(op["rounds"]):
            # A reader racing writers: the name must never be missing or mixed.
            try:
                data = read_or_none(cache.get_file(op["name"]))
            except FileNotFoundError:  # listed by get_file, gone at open
                data = None
            seen.add(b64(data if data is not None else b"<missing>"))
        return sorted(seen)
    raise ValueError(f"unknown op {kind}")


def main():
    ops = json.load(sys.stdin)
    print(json.dumps([run(op) for op in ops]))


if __name__ == "__main__":
    main()
