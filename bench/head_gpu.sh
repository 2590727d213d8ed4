#!/usr/bin/env bash
# The fused LM head (linear_cross_entropy_train: logits, loss, gradient, dh
# and dw) on one GPU at GPT-2 124M's shape, bf16, B·T = 16k rows: GPT-2's
# 50257 classes as they are and padded to 50304 (--vocab-multiple 128, the
# --target cuda default), with the split between the chunks' GEMMs and
# their row pass. Usage: bench/head_gpu.sh [build-dir] [rows] [chunk_mb]
# RESULT_JSON: also write the rows there (bench/gpu_results.py's
#   bench-head data).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
ROWS=${2:-16384}
CHUNK_MB=${3:-1024}
"$BUILD/bin/llmc-bench-head" "$ROWS" 768 50257 "$CHUNK_MB" > "$WORK/head.jsonl"
python3 - "$WORK/head.jsonl" "${RESULT_JSON:-}" <<'PY'
import json, sys
rows = [json.loads(line) for line in open(sys.argv[1])]
r0 = rows[0]
print(f"fused LM head fwd+bwd, bf16, {r0['rows']} rows x {r0['width']}, {r0['classes']} classes")
print(f"  {'vocab':>6} {'chunks':>9} {'fused ms':>9} {'TF/s':>6} {'GEMMs/chunk ms':>15} "
      f"{'GEMM TF/s':>10} {'rows/chunk ms':>14} {'rows GB/s':>10}")
for r in rows:
    print(f"  {r['vocab']:>6} {r['chunks']:>3} x {r['chunk_rows']:<4} {r['fused_ms']:>9.2f} "
          f"{r['fused_tflops']:>6.0f} {r['chunk_gemms_ms']:>15.3f} {r['gemm_tflops']:>10.0f} "
          f"{r['chunk_rows_ms']:>14.3f} {r['rows_gbps']:>10.0f}")
if sys.argv[2]:
    json.dump({"rows": [{"vocab": r["vocab"], "ms": r["fused_ms"], "tflops": r["fused_tflops"],
                         "chunks": r["chunks"], "gemm_tflops": r["gemm_tflops"],
                         "rows_gbps": r["rows_gbps"]} for r in rows]}, open(sys.argv[2], "w"))
PY
