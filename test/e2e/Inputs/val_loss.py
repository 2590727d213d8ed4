"""Compares the final validation losses of llmc-run logs.

usage: val_loss.py LOG_A LOG_B (lower|equal) [tolerance]
`lower`: B's validation loss is below A's; `equal`: they agree within the
relative tolerance (default 1e-6). Prints both losses.
"""
import re
import sys


def val_loss(path):
    found = re.findall(r"val loss ([0-9.]+)", open(path).read())
    if not found:
        sys.exit(f"{path}: no 'val loss' line")
    return float(found[-1])


if __name__ == "__main__":
    a, b = val_loss(sys.argv[1]), val_loss(sys.argv[2])
    mode = sys.argv[3]
    tolerance = float(sys.argv[4]) if len(sys.argv) > 4 else 1e-6
    print(f"{a:.4f} -> {b:.4f}")
    ok = b < a if mode == "lower" else abs(a - b) <= tolerance * abs(a)
    sys.exit(0 if ok else 1)
