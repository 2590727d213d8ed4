"""Prints, per rank, the names of a Chrome trace's spans for one step,
without the "step" spans (synchronisation and optimizer work between
actions).

    trace_actions.py <trace.json> <step>
"""
import json
import sys

events = json.load(open(sys.argv[1]))["traceEvents"]
step = int(sys.argv[2])
ranks = sorted({e["pid"] for e in events})
for rank in ranks:
    spans = [e for e in events
             if e["pid"] == rank and e.get("ph") == "X" and e["args"]["step"] == step]
    spans.sort(key=lambda e: e["ts"])
    names = [e["name"] for e in spans if e["name"] != "step"]
    # Consecutive pieces of one action (split by a "step" span) are one.
    merged = [n for i, n in enumerate(names) if i == 0 or names[i - 1] != n]
    print(f"rank {rank}: {' '.join(merged)}")
