#!/usr/bin/env python3
"""The CUDA conformance tests that a change can affect, as a gtest filter,
so a short GPU lease reruns only those (scripts/gpu-pack.sh writes it into
the pack; gpu-check.sh's conformance-changed step runs it).

  gpu_changed_tests.py [--since COMMIT | --files PATH...]

COMMIT defaults to the commit of the newest lease in bench/results/. The
change is everything between COMMIT and the working tree. A changed file
selects tests by the kernel names it concerns:
  - a kernels/cuda or kernels/cpu source: the kernels it registers
    (LLMC_REGISTER_KERNEL); a header there: the sources that include it,
    directly or through other headers;
  - a binding contract (kernels/contracts/X.*): the kernels of the sources
    that include kernels/contracts/X.h;
  - a shared header (common/X.h, kernels/X.h): the kernels of the sources
    that include it, directly or through other headers and contracts;
  - a CUDA test file (test/unit/kernels/cuda_*_test.cpp): all its tests;
  - a file of conformance cases (LLMC_CONFORMANCE_CASES(Family, ...)): the
    CUDA half of its cases, Cuda<Family>/CudaKernelConformance;
and every test suite of a CUDA test file, and the CUDA half of every file
of conformance cases, that names one of those kernels (anywhere: its
helpers too) is selected. Files every
kernel shares (the device, the registry, the conformance harness) select
every CUDA test ("Cuda*"), as does common/HostDevice.h (what the device
compiles of the shared headers). Prints "-" when nothing selects a test.
"""
import argparse
import glob
import json
import os
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SHARED = re.compile(r"^(common/HostDevice\.h|kernels/(Kernel\.h|Registry\.cpp|Tensor\.(h|cpp)|Validator\.(h|cpp)|CMakeLists\.txt)"
                    r"|kernels/cuda/(Device\.(cu|h)|Common\.cuh|BindScratch\.h|CMakeLists\.txt)"
                    r"|test/unit/kernels/(Conformance|CudaConformance|KernelTest)\.(h|cpp)|test/unit/kernels/CMakeLists\.txt)$")
REGISTER = re.compile(r'LLMC_REGISTER_KERNEL\(\s*(?:CPU|CUDA)\s*,\s*"([a-z0-9_]+)"')
TEST_START = re.compile(r"^TEST(?:_F|_P)?\((\w+),\s*(\w+)\)", re.M)
CONFORMANCE = re.compile(r"^LLMC_CONFORMANCE_CASES\((\w+),", re.M)


def read(path):
    with open(os.path.join(ROOT, path), errors="replace") as f:
        return f.read()


def newest_lease_commit():
    best = None
    for path in glob.glob(os.path.join(ROOT, "bench", "results", "*.json")):
        with open(path) as f:
            lease = json.load(f)
        if lease.get("commit") and (best is None or lease.get("date", "") > best[0]):
            best = (lease.get("date", ""), lease["commit"])
    return best[1] if best else None


def changed_files(since):
    out = subprocess.run(["git", "-C", ROOT, "diff", "--name-only", since], capture_output=True,
                         text=True, check=True).stdout.split()
    untracked = subprocess.run(["git", "-C", ROOT, "ls-files", "--others", "--exclude-standard"],
                               capture_output=True, text=True, check=True).stdout.split()
    return sorted(set(out + untracked))


def sources_including(header):
    """Kernel sources (cpu and cuda) that include `header` (a path under the root)."""
    pattern = re.compile(r'#include\s+"' + re.escape(header) + '"')
    found = []
    for src in glob.glob(os.path.join(ROOT, "kernels", "c*", "*.c*")):
        rel = os.path.relpath(src, ROOT)
        if pattern.search(read(rel)):
            found.append(rel)
    return found


def sources_including_through_headers(header):
    """Kernel sources that include `header` directly or through kernels/ and
    common/ headers, or through a binding contract's source (a shared
    header is mostly read through a contract)."""
    readers = {os.path.relpath(h, ROOT) for pattern in ("kernels/**/*.h", "kernels/**/*.cuh",
                                                        "kernels/contracts/*.cpp", "common/*.h")
               for h in glob.glob(os.path.join(ROOT, pattern), recursive=True)}
    reached, todo = {header}, [header]
    while todo:
        pattern = re.compile(r'#include\s+"' + re.escape(todo.pop()) + '"')
        for reader in readers - reached:
            if pattern.search(read(reader)):
                # A contract's source stands for its header, which the kernels include.
                found = re.sub(r"\.cpp$", ".h", reader)
                reached |= {reader, found}
                todo.append(found)
    return sorted(set().union(*(sources_including(h) for h in reached)))


def kernel_names(path):
    if not os.path.exists(os.path.join(ROOT, path)):
        return set()
    return set(REGISTER.findall(read(path)))


def kernels_of(path):
    """Kernel names a changed kernel-side file concerns."""
    if path.startswith("kernels/contracts/"):
        header = re.sub(r"\.(cpp|h)$", ".h", path)
        return set().union(*(kernel_names(s) for s in sources_including(header)), set())
    if re.match(r"(common|kernels)/[^/]+\.h$", path):
        return set().union(*(kernel_names(s) for s in sources_including_through_headers(path)), set())
    if re.match(r"kernels/(cpu|cuda)/", path):
        if path.endswith((".h", ".cuh")):
            return set().union(*(kernel_names(s) for s in sources_including_through_headers(path)),
                               set())
        return kernel_names(path)
    return set()


def cuda_test_files():
    """{path: (text, suites)} of the CUDA conformance test files."""
    files = {}
    for path in sorted(glob.glob(os.path.join(ROOT, "test", "unit", "kernels", "cuda_*_test.cpp"))):
        rel = os.path.relpath(path, ROOT)
        text = read(rel)
        suites = {m.group(1) for m in TEST_START.finditer(text)} - {"CudaBuild"}  # CudaBuild needs no GPU
        files[rel] = (text, suites)
    return files


def conformance_files():
    """{path: (text, suites)} of the files of conformance cases: the suites
    of their CUDA halves."""
    files = {}
    for path in sorted(glob.glob(os.path.join(ROOT, "test", "unit", "kernels", "*_test.cpp"))):
        rel = os.path.relpath(path, ROOT)
        text = read(rel)
        suites = {f"Cuda{family}/CudaKernelConformance" for family in CONFORMANCE.findall(text)}
        if suites:
            files[rel] = (text, suites)
    return files


def select(files):
    if any(SHARED.match(f) for f in files):
        return "Cuda*"
    names = set().union(*(kernels_of(f) for f in files), set())
    chosen = set()
    for path, (text, suites) in {**cuda_test_files(), **conformance_files()}.items():
        if path in files or any(f'"{k}"' in text for k in names):
            chosen |= suites
    return ":".join(f"{suite}.*" for suite in sorted(chosen)) or "-"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--since", help="commit of the last GPU check (default: the newest in bench/results/)")
    ap.add_argument("--files", nargs="+", help="the changed paths, instead of asking git")
    args = ap.parse_args()
    if args.files:
        print(select(args.files))
        return 0
    since = args.since or newest_lease_commit()
    if not since:
        print("Cuda*")
        return 0
    print(select(changed_files(since)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
