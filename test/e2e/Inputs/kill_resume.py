"""Kills a training run with SIGKILL at random moments, many times, while it
writes a checkpoint every step (keeping only the last two), resuming after
each kill; the finished run must have exactly the losses of one
uninterrupted run, and the checkpoint directory must hold only what the
retention policy keeps.

    kill_resume.py <llmc-run> <artifact> <work dir> <kills> <steps>
"""
import json
import os
import random
import signal
import subprocess
import sys
import time

run, artifact, work, kills, steps = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5])
random.seed(7)
os.makedirs(work, exist_ok=True)


def losses(path):
    """step -> loss, the last record of each step (a resumed run repeats the
    steps after its checkpoint; a killed run may leave a partial line)."""
    out = {}
    for line in open(path):
        try:
            record = json.loads(line)
        except json.JSONDecodeError:
            continue
        out[record["step"]] = record["loss"]
    return out


subprocess.run([run, artifact, "--steps", str(steps), "--metrics", f"{work}/reference.jsonl",
                "--quiet"], check=True)
ckpt = f"{work}/ck"
command = [run, artifact, "--steps", str(steps), "--ckpt-dir", ckpt, "--ckpt-every", "1",
           "--keep-last", "2", "--metrics", f"{work}/killed.jsonl", "--quiet"]
killed = 0
for attempt in range(kills):
    resume = ["--resume"] if os.path.exists(f"{ckpt}/latest") else []
    process = subprocess.Popen(command + resume)
    time.sleep(random.uniform(0.05, 0.8))
    if process.poll() is None:
        process.send_signal(signal.SIGKILL)
        killed += 1
    process.wait()
resume = ["--resume"] if os.path.exists(f"{ckpt}/latest") else []
subprocess.run(command + resume, check=True)

want, got = losses(f"{work}/reference.jsonl"), losses(f"{work}/killed.jsonl")
assert sorted(got) == sorted(want), f"steps {sorted(set(want) - set(got))} never ran"
for step in want:
    assert got[step] == want[step], f"step {step}: loss {got[step]} after kills, {want[step]} uninterrupted"
kept = sorted(name for name in os.listdir(ckpt) if name != "latest")
assert kept == [f"step_{steps - 1:08d}", f"step_{steps:08d}"], f"checkpoints left: {kept}"
print(f"{killed} kills, {len(want)} steps identical, checkpoints left: {' '.join(kept)}")
