#!/usr/bin/env python3
"""Checks that every llmc pass has its file and its lit test, and every
fusion its file.

  pass_files.py <root>

<root> is the project root (or a tree laid out like it). For each
`def <Def> : Pass<"<argument>", ...>` of passes/Passes.td:

  - passes/<Def>.cpp exists and defines the pass (GEN_PASS_DEF_<DEF>), and
    no other file under passes/ does;
  - some RUN line of test/passes/*.mlir names <argument> (as a flag,
    `--<argument>`, or inside a pipeline string).

passes/ holds no other .cpp at its top level: helpers go to passes/lib/,
fusions to passes/fuse/. When passes/fuse/Fusions.h exists, each fusion
name it declares (`kFuse<Name> = "<name>"`, <Name> being <name> in
CamelCase, as qkv-split -> QkvSplit, any letter's case) has
passes/fuse/<Name>.cpp, passes/fuse/ holds
no other .cpp, and the Fuse pass's `fusions` option in Passes.td lists
exactly those names.

Prints one line per problem and exits 1; otherwise prints a one-line
summary and exits 0.
"""
import argparse
import glob
import os
import re
import sys

PASS_DEF = re.compile(r'^def (\w+)\s*:\s*Pass<"([^"]+)"', re.M)
GEN_DEF = re.compile(r'^\s*#\s*define\s+GEN_PASS_DEF_(\w+)', re.M)
RUN = re.compile(r'^\s*//\s*RUN:(.*)$', re.M)
FUSION = re.compile(r'\bkFuse(\w+)\s*=\s*"([^"]+)"')
TOKEN_SEPARATORS = re.compile(r'[\s"\'{}(),=:;|]+')


def read(path):
    with open(path, encoding="utf-8") as f:
        return f.read()


def camel(name):
    """qkv-split -> QkvSplit."""
    return "".join(part[:1].upper() + part[1:] for part in name.split("-"))


def run_arguments(root):
    """Every word of a test/passes/*.mlir RUN line, leading dashes dropped,
    mapped to the tests that use it."""
    used = {}
    for path in sorted(glob.glob(os.path.join(root, "test", "passes", "*.mlir"))):
        for line in RUN.findall(read(path)):
            for word in TOKEN_SEPARATORS.split(line):
                used.setdefault(word.lstrip("-"), set()).add(os.path.basename(path))
    return used


def check_passes(root, defs, problems):
    passes_dir = os.path.join(root, "passes")
    # Which file defines which pass, anywhere under passes/.
    defined_in = {}
    for path in sorted(glob.glob(os.path.join(passes_dir, "**", "*.cpp"), recursive=True)):
        for name in GEN_DEF.findall(read(path)):
            defined_in.setdefault(name, []).append(os.path.relpath(path, root))
    used = run_arguments(root)
    for def_name, argument in defs:
        expected = os.path.join("passes", def_name + ".cpp")
        if not os.path.isfile(os.path.join(root, expected)):
            problems.append(f"passes/Passes.td: pass {def_name} ({argument}) has no file {expected}")
        else:
            where = defined_in.get(def_name.upper(), [])
            if expected not in where:
                problems.append(f"{expected}: does not define pass {def_name} "
                                f"(no #define GEN_PASS_DEF_{def_name.upper()})")
            for other in where:
                if other != expected:
                    problems.append(f"{other}: defines pass {def_name}, whose file is {expected}")
        if argument not in used:
            problems.append(f"passes/Passes.td: pass {def_name} ({argument}) has no lit test: "
                            f"no RUN line of test/passes/*.mlir uses {argument}")
    known = {def_name + ".cpp" for def_name, _ in defs}
    for path in sorted(glob.glob(os.path.join(passes_dir, "*.cpp"))):
        if os.path.basename(path) not in known:
            problems.append(f"{os.path.relpath(path, root)}: not a pass of passes/Passes.td "
                            f"(helpers belong in passes/lib/, fusions in passes/fuse/)")


def check_fusions(root, td, problems):
    header = os.path.join(root, "passes", "fuse", "Fusions.h")
    if not os.path.isfile(header):
        return 0
    fusions = FUSION.findall(read(header))
    names = set()
    for constant, name in fusions:
        names.add(name)
        expected = os.path.join("passes", "fuse", constant + ".cpp")
        if camel(name).lower() != constant.lower():
            problems.append(f"passes/fuse/Fusions.h: kFuse{constant} names '{name}', "
                            f"expected kFuse{camel(name)}")
        if not os.path.isfile(os.path.join(root, expected)):
            problems.append(f"passes/fuse/Fusions.h: fusion '{name}' has no file {expected}")
    files = {constant + ".cpp" for constant, _ in fusions}
    for path in sorted(glob.glob(os.path.join(root, "passes", "fuse", "*.cpp"))):
        if os.path.basename(path) not in files:
            problems.append(f"{os.path.relpath(path, root)}: not a fusion of passes/fuse/Fusions.h")
    # The Fuse pass's `fusions` option help: "all | none | comma-separated
    # fusion names (a, b, ...)", possibly over several string pieces.
    option = re.search(r'Option<"fusions",(.*?)>', td, re.S)
    if option:
        text = "".join(re.findall(r'"([^"]*)"', option.group(1)))
        listed = re.search(r"fusion names \(([^)]*)\)", text)
        documented = {n.strip() for n in listed.group(1).split(",")} if listed else set()
        if documented != names:
            problems.append("passes/Passes.td: the Fuse pass's fusions option lists "
                            f"{', '.join(sorted(documented)) or 'nothing'}; "
                            f"passes/fuse/Fusions.h declares {', '.join(sorted(names))}")
    return len(names)


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("root", help="the project root (or a tree laid out like it)")
    args = ap.parse_args()
    td_path = os.path.join(args.root, "passes", "Passes.td")
    if not os.path.isfile(td_path):
        print(f"{td_path}: no such file", file=sys.stderr)
        return 1
    td = read(td_path)
    defs = PASS_DEF.findall(td)
    if not defs:
        print(f"{td_path}: no pass definitions", file=sys.stderr)
        return 1
    problems = []
    check_passes(args.root, defs, problems)
    fusions = check_fusions(args.root, td, problems)
    for problem in problems:
        print(problem)
    if problems:
        print(f"pass files: {len(problems)} problem(s)", file=sys.stderr)
        return 1
    print(f"pass files: {len(defs)} passes, each in its file with a lit test; "
          f"{fusions} fusions, each in its file")
    return 0


if __name__ == "__main__":
    sys.exit(main())
