#!/usr/bin/python3
"""PyTorch's side of bench/gemm_cpu.sh: times torch.mm on the GEMM shapes
llmc-bench-gemm wrote (--rows FILE), with the same transposes (views, so
PyTorch hands BLAS the same layouts), threads and repetition rule, and
prints them beside OpenBLAS's times through llmc's loader.

Usage: torch_gemm.py --threads N [--min-ms MS] ROWS-FILE"""
import argparse
import ctypes
import os
import time


def blas_info():
    """The BLAS libraries this process mapped, with OpenBLAS's core type and
    thread count where the library answers."""
    libs = sorted({l.split()[-1] for l in open("/proc/self/maps")
                   if "blas" in l.split()[-1] or "mkl" in l.split()[-1]})
    info = []
    for path in libs:
        try:
            lib = ctypes.CDLL(path)
            lib.openblas_get_corename.restype = ctypes.c_char_p
            info.append(f"{os.path.basename(path)} (core {lib.openblas_get_corename().decode()}, "
                        f"{lib.openblas_get_num_threads()} threads)")
        except (OSError, AttributeError):
            info.append(os.path.basename(path))
    return ", ".join(info) or "none mapped"


def time_mm(torch, a, b, c, min_ms):
    """(best, median) ms of torch.mm(a, b, out=c): one warm-up, then at
    least 3 runs and min_ms in all, as llmc-bench-gemm times sgemm."""
    torch.mm(a, b, out=c)
    ms = []
    start = time.perf_counter()
    while len(ms) < 3 or ((time.perf_counter() - start) * 1e3 < min_ms and len(ms) < 200):
        t0 = time.perf_counter()
        torch.mm(a, b, out=c)
        ms.append((time.perf_counter() - t0) * 1e3)
    ms.sort()
    return ms[0], ms[len(ms) // 2]


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--threads", type=int, required=True)
    parser.add_argument("--min-ms", type=float, default=300)
    parser.add_argument("rows")
    args = parser.parse_args()
    # OpenBLAS (pthreads) reads its thread count when torch loads it.
    os.environ["OPENBLAS_NUM_THREADS"] = str(args.threads)
    import torch
    torch.set_num_threads(args.threads)

    peak, gemms = None, []
    for line in open(args.rows):
        f = line.split()
        if f[0] == "peak":
            peak = float(f[2])
        elif f[0] == "gemm":
            seq, ta, tb, m, n, k, count = map(int, f[1:8])
            gemms.append({"seq": seq, "ta": ta, "tb": tb, "m": m, "n": n, "k": k, "count": count,
                          "blas_best": float(f[8]), "blas_median": float(f[9]),
                          "label": " ".join(f[10:])})
    torch.mm(torch.ones(2, 2), torch.ones(2, 2))  # loads BLAS
    print(f"PyTorch {torch.__version__}, {torch.get_num_threads()} threads, BLAS: {blas_info()}")

    for seq in sorted({g["seq"] for g in gemms}, key=[g["seq"] for g in gemms].index):
        rows = [g for g in gemms if g["seq"] == seq]
        print(f"\nGPT-2 124M, B=4, T={seq}: torch.mm vs OpenBLAS sgemm through llmc, best times")
        print(f"  {'gemm':26s} {'op':2s} {'count':>5s} {'llmc GFLOP/s':>12s} {'torch GFLOP/s':>13s}"
              f" {'torch % peak':>12s} {'torch/llmc':>10s}")
        gflop = torch_best = torch_median = blas_best = 0.0
        for g in rows:
            m, n, k = g["m"], g["n"], g["k"]
            a = torch.rand(k, m).t() if g["ta"] else torch.rand(m, k)
            b = torch.rand(n, k).t() if g["tb"] else torch.rand(k, n)
            c = torch.empty(m, n)
            best, median = time_mm(torch, a, b, c, args.min_ms)
            flop = 2.0 * m * n * k / 1e9
            rate, blas_rate = flop / best * 1e3, flop / g["blas_best"] * 1e3
            op = ("T" if g["ta"] else "N") + ("T" if g["tb"] else "N")
            print(f"  {g['label']:26s} {op:2s} {g['count']:5d} {blas_rate:12.1f} {rate:13.1f}"
                  f" {100 * rate / peak:11.1f}% {rate / blas_rate:9.2f}x")
            gflop += g["count"] * flop
            torch_best += g["count"] * best
            torch_median += g["count"] * median
            blas_best += g["count"] * g["blas_best"]
        print(f"  step: {gflop:.1f} GFLOP of GEMMs; torch {torch_best / 1e3:.3f} s at the best times"
              f" ({gflop / torch_best * 1e3:.1f} GFLOP/s), {torch_median / 1e3:.3f} s at the medians;"
              f" llmc's OpenBLAS {blas_best / 1e3:.3f} s ({gflop / blas_best * 1e3:.1f} GFLOP/s)")


if __name__ == "__main__":
    main()
