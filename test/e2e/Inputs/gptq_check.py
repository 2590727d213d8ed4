"""Checks for test/e2e/quantize-gptq.test.

  lower-error REPORT   every weight in the GPTQ table of an `llmc quantize
                       --method gptq` report has a lower layer output error
                       than round-to-nearest's"""
import re
import sys

mode, path = sys.argv[1:3]
if mode != "lower-error":
    sys.exit(f"unknown mode {mode}")
rows = re.findall(r"^  (\S+) +(\d+) +(\d+) +(\S+) +(\S+) +(\S+)$", open(path).read(), re.M)
rows = [r for r in rows if r[0] != "tensor"]
worse = [r[0] for r in rows if not float(r[4]) < float(r[3])]
print(f"{len(rows)} weights, {len(worse)} not improved: {' '.join(worse)}")
sys.exit(0 if rows and not worse else 1)
