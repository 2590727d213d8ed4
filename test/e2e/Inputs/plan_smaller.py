"""plan_smaller.py A.inspect B.inspect LINE...: every named line of
`llmc inspect`'s memory plan ("activations", "arena") is smaller in A than
in B; prints both sizes, exits 1 naming the first that is not."""
import re
import sys

UNITS = {"B": 1, "KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30}


def sizes(path):
    found = {}
    for line in open(path):
        m = re.match(r"\s+(\w+)\s+([\d.]+) (B|KiB|MiB|GiB)\b", line)
        if m and m.group(1) not in found:
            found[m.group(1)] = float(m.group(2)) * UNITS[m.group(3)]
    return found


a, b = sizes(sys.argv[1]), sizes(sys.argv[2])
for name in sys.argv[3:]:
    if name not in a or name not in b:
        sys.exit(f"plan_smaller: no '{name}' line in both plans")
    print(f"{name}: {a[name] / 2**20:.2f} MiB vs {b[name] / 2**20:.2f} MiB")
    if not a[name] < b[name]:
        sys.exit(f"plan_smaller: {name} is not smaller: {a[name]:.0f} B vs {b[name]:.0f} B")
