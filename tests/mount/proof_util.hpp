// Shared by the proof tests (proof_test.cpp, proof_two_daemons_test.cpp):
// the in-process driver of the TileLang protocol script and the argv and
// environment its runs use.
#pragma once

#include <cstdlib>
#include <string>
#include <vector>

#include "tests/mount/mount_test_util.hpp"

namespace sealfs::test::proof {

inline constexpr int kLost = 2;  // save: another writer published first

// Loops over the protocol script's own save/load (imported, not copied):
//   check  CACHE NS            load every key listed under NS/kernels; exit 4 if any is corrupt
//   writer CACHE ID KEYS SECS  save KEYS keys (same order in every writer) in namespace g<N>,
//                              N = 0, 1, … until SECS pass; the started namespace is finished
//   reader CACHE SECS          load random listed keys of random namespaces until SECS pass;
//                              exit 4 at the first corrupt load
// The script's own prints go to /dev/null; each role prints one summary line.
inline constexpr const char* kDriver = R"PY(
import contextlib, importlib.util, os, random, sys, time
sys.dont_write_bytecode = True
spec = importlib.util.spec_from_file_location("tl", os.environ["SEALFS_TILELANG_PROTOCOL"])
tl = importlib.util.module_from_spec(spec)
spec.loader.exec_module(tl)
role, cache = sys.argv[1], sys.argv[2]
quiet = open(os.devnull, "w")

def listed(path):
    try:
        return sorted(os.listdir(path))
    except OSError:
        return []

if role == "check":
    ns = sys.argv[3]
    counts, corrupt = {}, []
    for key in listed(os.path.join(cache, ns, "kernels")):
        with contextlib.redirect_stdout(quiet):
            rc = tl.load(cache, ns, key)
        counts[rc] = counts.get(rc, 0) + 1
        if rc == tl.EXIT_CORRUPT:
            corrupt.append(key)
    print(f"check {ns}: {counts} corrupt={corrupt}")
    sys.exit(tl.EXIT_CORRUPT if corrupt else 0)

if role == "writer":
    ident, nkeys, seconds = sys.argv[3], int(sys.argv[4]), float(sys.argv[5])
    deadline = time.monotonic() + seconds
    counts, gen = {}, 0
    while True:
        for i in range(nkeys):
            try:
                with contextlib.redirect_stdout(quiet):
                    rc = tl.save(cache, f"g{gen}", f"key{i}", f"w{ident}", 4096 + 512 * int(ident))
            except OSError as e:
                rc = f"error {e}"
            counts[rc] = counts.get(rc, 0) + 1
        gen += 1
        if time.monotonic() >= deadline:
            break
    print(f"writer {ident}: namespaces={gen} {counts}")
    sys.exit(0 if all(isinstance(k, int) for k in counts) else 1)

if role == "reader":
    seconds = float(sys.argv[3])
    deadline = time.monotonic() + seconds
    rng = random.Random(os.getpid())
    counts = {}
    while time.monotonic() < deadline:
        spaces = [d for d in listed(cache) if d != "tmp" and not d.startswith(".")]
        ns = rng.choice(spaces) if spaces else ""
        keys = listed(os.path.join(cache, ns, "kernels")) if spaces else []
        if not keys:
            time.sleep(0.01)
            continue
        key = rng.choice(keys)
        with contextlib.redirect_stdout(quiet):
            rc = tl.load(cache, ns, key)
        counts[rc] = counts.get(rc, 0) + 1
        if rc == tl.EXIT_CORRUPT:
            print(f"reader: corrupt load of {ns}/{key}: {counts}")
            sys.exit(tl.EXIT_CORRUPT)
    print(f"reader: {counts}")
    sys.exit(0)
sys.exit(1)
)PY";

inline std::vector<std::string> driver_argv(std::vector<std::string> args) {
  std::vector<std::string> argv = {std::getenv("SEALFS_PYTHON"), "-c", kDriver};
  argv.insert(argv.end(), args.begin(), args.end());
  return argv;
}

inline const std::vector<std::string> kPythonEnv = {"PYTHONDONTWRITEBYTECODE=1"};

inline ProcessResult check_namespace(const std::string& cache, const std::string& ns) {
  return run_process(driver_argv({"check", cache, ns}), kPythonEnv);
}

inline std::vector<std::string> save_argv(const std::string& cache, const std::string& key,
                                          std::vector<std::string> extra = {}) {
  std::vector<std::string> argv = {std::getenv("SEALFS_PYTHON"), std::getenv("SEALFS_TILELANG_PROTOCOL"),
                                   "save", cache, key};
  argv.insert(argv.end(), extra.begin(), extra.end());
  return argv;
}

inline std::string file_text(const std::string& path) { return read_file(path).value_or("<unreadable>"); }

}  // namespace sealfs::test::proof
