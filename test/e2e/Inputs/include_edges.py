#!/usr/bin/env python3
"""Checks that llmc's #include edges go only downwards between its layers.

  include_edges.py <root> [--print-table] [--doc design.md]

Every source and header under <root> (C++, CUDA, TableGen) is read; each
`#include "..."` (TableGen: `include "..."`) names a file of some layer (a
top-level folder), found from the project root or, failing that, beside the
including file. An edge is allowed when it stays inside a layer or the
layer's row of ALLOWED below names the target folder (or a subfolder of it,
such as kernels/reference). Layers that are plain C++ (PLAIN_CPP) may not
include MLIR or LLVM headers, and common/ no CUDA or MPI header either.
A source file in a top-level folder the table does not name is an error too,
so a new folder has to take a place in the table.

Prints one line per violation (file:line: what may not include what) and
exits 1; otherwise prints a one-line summary and exits 0. --print-table
prints the table first. --doc also checks that the table of the page's
"Layout" section (a row per folder, what it may include in backquotes in
the last column, or "anything") says what ALLOWED says.
"""
import argparse
import os
import re
import subprocess
import sys

ANY = "anything"

# Layer -> what its files may include besides their own layer (docs/design.md,
# "Layout"). Lower layers never include higher ones.
ALLOWED = {
    "common": [],
    "kernels": ["common"],
    "runtime": ["kernels", "common"],
    "dialects": ["common"],
    "passes": ["dialects", "common"],
    "models": ["dialects", "common"],
    # The IR interpreter evaluates ops with the double-precision references.
    "compiler": ["passes", "models", "dialects", "common", "kernels/reference"],
    "tools": ANY,
    "bench": ["runtime", "kernels", "common"],
    "examples": ["passes", "dialects", "common"],
    "test": ANY,
}

MLIR = re.compile(r"^(mlir|llvm|llvm-c)/")
CUDA_OR_MPI = re.compile(r"^(cuda|cublas|cudnn|curand|cusparse|nccl|nvrtc|mpi)[^/]*\.h")
# Layer -> (pattern, what it is) of outside headers it may not include.
FORBIDDEN_OUTSIDE = {
    "common": [(MLIR, "an MLIR/LLVM header"), (CUDA_OR_MPI, "a CUDA/MPI header")],
    "kernels": [(MLIR, "an MLIR/LLVM header")],
    "runtime": [(MLIR, "an MLIR/LLVM header")],
    "bench": [(MLIR, "an MLIR/LLVM header")],
}

SOURCE = re.compile(r"\.(h|hpp|c|cc|cpp|cu|cuh|inc|def|td)$")
INCLUDE = re.compile(r'^\s*#\s*include\s*([<"])([^>"]+)[>"]')
TD_INCLUDE = re.compile(r'^\s*include\s*"([^"]+)"')
SKIP_DIRS = re.compile(r"^(\..*|build.*|out|gpu-pack)$")


def source_files(root):
    """Paths (relative to root) of the sources to check: git's view of the
    tree (tracked and untracked, not ignored) when root is in a git work
    tree, else a walk that leaves build trees and hidden folders out."""
    try:
        out = subprocess.run(["git", "-C", root, "ls-files", "-z", "--cached", "--others",
                              "--exclude-standard"], capture_output=True, check=True).stdout
        paths = [p for p in out.decode().split("\0") if p]
        return sorted(p for p in paths if SOURCE.search(p) and os.path.isfile(os.path.join(root, p)))
    except (OSError, subprocess.CalledProcessError):
        pass
    found = []
    for dirpath, dirnames, filenames in os.walk(root):
        rel = os.path.relpath(dirpath, root)
        dirnames[:] = [d for d in dirnames
                       if not (rel == "." and SKIP_DIRS.match(d)) and not d.startswith(".")
                       and not os.path.exists(os.path.join(dirpath, d, "CMakeCache.txt"))]
        found += [os.path.normpath(os.path.join(rel, f)) for f in filenames if SOURCE.search(f)]
    return sorted(found)


def layer_of(path):
    return path.split("/", 1)[0] if "/" in path else None


def target_of(root, source, name):
    """The project path `name` refers to from `source`, or None (outside)."""
    if layer_of(name) in ALLOWED:
        return name
    beside = os.path.normpath(os.path.join(os.path.dirname(source), name))
    if not beside.startswith("..") and os.path.isfile(os.path.join(root, beside)):
        return beside
    return None


def allowed(layer, target):
    rule = ALLOWED[layer]
    if rule == ANY or layer_of(target) == layer:
        return True
    return any(target == entry or target.startswith(entry + "/") for entry in rule)


def includes(root, path):
    """(line number, quote or angle, name) of each include in the file."""
    with open(os.path.join(root, path), errors="replace") as f:
        for number, line in enumerate(f, 1):
            m = INCLUDE.match(line)
            if m:
                yield number, m.group(1), m.group(2)
            elif path.endswith(".td"):
                m = TD_INCLUDE.match(line)
                if m:
                    yield number, '"', m.group(1)


def check(root):
    """(violations, files checked, includes checked)."""
    violations, files, edges = [], 0, 0
    for path in source_files(root):
        layer = layer_of(path)
        if layer not in ALLOWED:
            where = f"folder '{layer}/'" if layer else "the project root"
            violations.append(f"{path}: {where} is not a layer of the include table")
            continue
        files += 1
        for number, quote, name in includes(root, path):
            edges += 1
            target = target_of(root, path, name) if quote == '"' else None
            if target is not None:
                if not allowed(layer, target):
                    rule = ALLOWED[layer]
                    may = ", ".join(rule) if rule else f"nothing outside {layer}/"
                    violations.append(f"{path}:{number}: {layer} -> {layer_of(target)} is not allowed "
                                      f"(includes \"{name}\"; {layer} may include {may})")
                continue
            for pattern, what in FORBIDDEN_OUTSIDE.get(layer, []):
                if pattern.search(name):
                    violations.append(f"{path}:{number}: {layer} may not include {what} ({name})")
    return violations, files, edges


DOC_ROW = re.compile(r"^\|\s*`([a-z]+)/`\s*\|.*\|(.*)\|\s*$")


def doc_table(path):
    """{layer: (line, what it may include)} from the rows of the page's
    "## Layout" section."""
    table, in_layout = {}, False
    with open(path) as f:
        for number, line in enumerate(f, 1):
            if line.startswith("## "):
                in_layout = line.strip() == "## Layout"
            m = DOC_ROW.match(line) if in_layout else None
            if m:
                may = m.group(2)
                names = re.findall(r"`([a-z/]+)/`", may)
                table[m.group(1)] = (number, ANY if may.strip() == ANY else names)
    return table


def check_doc(path):
    """Where the page's table and ALLOWED disagree, one line each."""
    table, problems = doc_table(path), []
    for layer, rule in ALLOWED.items():
        if layer not in table:
            problems.append(f"{path}: no row for '{layer}/' in the \"Layout\" table")
            continue
        number, written = table[layer]
        if (written == ANY) != (rule == ANY) or (rule != ANY and sorted(written) != sorted(rule)):
            shown = lambda r: r if r == ANY else ", ".join(r) or "(nothing)"
            problems.append(f"{path}:{number}: '{layer}/' may include {shown(written)} here, "
                            f"but {shown(rule)} in include_edges.py")
    for layer, (number, _) in table.items():
        if layer not in ALLOWED:
            problems.append(f"{path}:{number}: '{layer}/' is not a layer of include_edges.py")
    return problems


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("root", help="the project root (or a tree laid out like it)")
    ap.add_argument("--print-table", action="store_true", help="print the allowed edges first")
    ap.add_argument("--doc", help="a page whose \"Layout\" table must say the same (docs/design.md)")
    args = ap.parse_args()
    if args.print_table:
        for layer, rule in ALLOWED.items():
            print(f"{layer} -> {rule if rule == ANY else ', '.join(rule) or '(nothing)'}")
    violations, files, edges = check(args.root)
    doc_problems = check_doc(args.doc) if args.doc else []
    for v in violations + doc_problems:
        print(v)
    if violations:
        print(f"include edges: {len(violations)} violation(s) in {files} files", file=sys.stderr)
    if doc_problems:
        print(f"include edges: {args.doc} and the table disagree", file=sys.stderr)
    if violations or doc_problems:
        return 1
    print(f"include edges: {files} files, {edges} includes, every edge allowed"
          + (f"; {args.doc} agrees" if args.doc else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
