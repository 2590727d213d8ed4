#!/usr/bin/env bash
# Causal attention forward+backward TFLOP/s on one GPU, bf16, seq 1k–8k
# (B·T = 16k tokens): llmc's attention as each `llmc-run --attention`
# choice runs it (cuda-cores, tensor-cores, cudnn) and PyTorch's
# scaled_dot_product_attention on the same shapes, in one run. A choice
# that fell back prints "-" and, below the table, why.
# Usage: bench/attention_gpu.sh [build-dir] [head_dim] [heads]
# TORCH_PYTHON: the python3 that has PyTorch (default /usr/bin/python3).
# RESULT_JSON: also write the rows there (bench/gpu_results.py's
#   bench-attention-<D> data).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
D=${2:-128}
H=${3:-16}
"$BUILD/bin/llmc-bench-attention" "$D" "$H" > "$WORK/llmc.jsonl"
"${TORCH_PYTHON:-/usr/bin/python3}" - "$WORK/llmc.jsonl" "$D" "$H" "${RESULT_JSON:-}" <<'PY'
import json, sys, torch
import torch.nn.functional as F
D, H = int(sys.argv[2]), int(sys.argv[3])
print(f"causal attention, bf16, H={H}, D={D}, fwd+bwd TFLOP/s (torch {torch.__version__})")
print(f"  {'seq':>5} {'llmc cc':>8} {'llmc tc':>8} {'cudnn':>8} {'SDPA':>8} {'cudnn/SDPA':>10}")
notes, rows = [], []
for line in open(sys.argv[1]):
    r = json.loads(line)
    T, B = r["seq"], r["batch"]
    q, k, v = (torch.randn(B, H, T, D, device="cuda", dtype=torch.bfloat16, requires_grad=True)
               for _ in range(3))
    def run():
        out = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        out.backward(torch.ones_like(out))
    for _ in range(3): run()
    start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(10): run()
    stop.record(); torch.cuda.synchronize()
    ms = start.elapsed_time(stop) / 10
    flops = 3.5 * 4.0 * B * H * T * T * D / 2.0
    sdpa = flops / ms / 1e9
    cell = lambda x: f"{x:8.1f}" if x is not None else f"{'-':>8}"
    cc, tc, cudnn = (r.get(p + "fwd_bwd_tflops") for p in ("", "tc_", "cudnn_"))
    ratio = f"{cudnn / sdpa:10.2f}" if cudnn is not None else f"{'-':>10}"
    print(f"  {T:>5} {cell(cc)} {cell(tc)} {cell(cudnn)} {cell(sdpa)} {ratio}")
    names = {"": "cuda-cores", "tc_": "tensor-cores", "cudnn_": "cudnn"}
    notes += [f"  seq {T}, {name}: {r[p + 'note']}" for p, name in names.items() if p + "note" in r]
    rows.append({"seq": T, "heads": H, "head_dim": D, "sdpa_tflops": sdpa,
                 "tflops": {names[p]: r[p + "fwd_bwd_tflops"] for p in names
                            if r.get(p + "fwd_bwd_tflops") is not None}})
for n in notes:
    print(n)
if sys.argv[4]:
    json.dump({"rows": rows}, open(sys.argv[4], "w"))
PY
