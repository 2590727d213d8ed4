"""GPT-style models from 124M to 175B shapes on N = 8..1024 data-parallel
ranks: `llmc inspect`'s model states against the ZeRO paper's formulas.

For each model, N and ZeRO stage (mixed precision, GPT-2's vocabulary of
50257, which no N here divides):
  - Ψ is the model's parameter count, computed here from its shape;
  - the formula column is the published one (p = g = 2, K = 12), computed
    here from Ψ and N;
  - the plan equals the formula plus its itemized extras within 1%, and
    what no item explains stays under 1% of the formula;
  - gradients are fp32 (--grad-dtype fp32, the default): the formula keeps
    the paper's g = 2 and an item adds the other 2 bytes, 2Ψ (2Ψ/N from
    stage 2);
  - every tensor is sharded, those whose dimension 0 N does not divide
    padded to a multiple of N (the embedding among them): the optimizer's
    padding item is K·(ceil(d0/N)·N − d0)/N per row of exactly those.
"""
import re
import subprocess
import sys

llmc = sys.argv[1]
workdir = sys.argv[2]

SHAPES = {  # name: (layers, width, heads, ffn)
    "124M": (12, 768, 12, 3072),
    "1.5B": (48, 1600, 25, 6400),
    "175B": (96, 12288, 96, 49152),
}
VOCAB, POSITIONS = 50257, 1024
UNITS = {"B": 1, "KiB": 1024, "MiB": 1024**2, "GiB": 1024**3, "TiB": 1024**4}


def size(text):
    value, unit = text.split()
    return float(value) * UNITS[unit]


def tensors(layers, d, ffn):
    """GPT-2's parameter shapes (Conv1D weights are [in, out])."""
    layer = [[d], [d], [d, 3 * d], [3 * d], [d, d], [d], [d], [d], [d, ffn], [ffn], [ffn, d], [d]]
    return [[VOCAB, d], [POSITIONS, d]] + layer * layers + [[d], [d]]


def count(shape):
    n = 1
    for extent in shape:
        n *= extent
    return n


def check(name, shape, n, stage):
    layers, d, heads, ffn = shape
    out = f"{workdir}/{name}-{n}-{stage}.llmc"
    subprocess.run([f"{llmc}/llmc", "compile", "--model", "gpt2", "--preset", "124M",
                    "--set", f"n_layer={layers}", "--set", f"n_embd={d}",
                    "--set", f"n_head={heads}", "--set", f"n_kv_head={heads}",
                    "--set", f"ffn_hidden={ffn}", "--set", "seq_len=64",
                    "--set", f"batch_size={n}", "--mesh", f"dp={n}", "--zero", str(stage),
                    "--precision", "bf16", "-o", out], check=True)
    report = subprocess.run([f"{llmc}/llmc", "inspect", out], check=True,
                            capture_output=True, text=True).stdout
    where = f"{name} N={n} stage {stage}"
    psi = int(re.search(r"Ψ = (\d+) trainable", report).group(1))
    shapes = tensors(layers, d, ffn)
    expected_psi = sum(count(t) for t in shapes)
    assert psi == expected_psi, f"{where}: Ψ {psi} != {expected_psi}"
    assert "p = 2, g = 2, K = 12" in report, f"{where}: not the published K = 12"

    p, g, k = 2, 2, 12
    formula = {"parameters": p * psi / (n if stage >= 3 else 1),
               "gradients": g * psi / (n if stage >= 2 else 1),
               "optimizer": k * psi / (n if stage >= 1 else 1)}
    planned = {}
    for state in formula:
        row = re.search(rf"^  {state} +([\d.]+ \w+) +\S+ +([\d.]+ \w+)", report, re.M)
        planned[state] = size(row.group(1))
        printed = size(row.group(2))
        assert abs(printed - formula[state]) <= 0.005 * formula[state] + 1, \
            f"{where}: {state} formula printed {printed}, published {formula[state]}"
    extras = {state: 0.0 for state in formula}
    fp32_gradients = None
    unexplained = 0.0
    for state, sign, amount, what in re.findall(
            r"^    (\w+) +([+-])([\d.]+ \w+)  (.*)$", report, re.M):
        value = size(amount) * (-1 if sign == "-" else 1)
        extras[state] += value
        if what.startswith("not itemized"):
            unexplained += abs(value)
        assert not what.startswith("not sharded"), f"{where}: {state} {what}"
        if state == "gradients" and what.startswith("fp32 gradients"):
            fp32_gradients = value
        if state == "optimizer" and what.startswith("padding"):
            # Every tensor whose dimension 0 the N ranks do not divide is
            # padded to a multiple of N: ceil(d0 / N) rows on every rank.
            padding = sum(k * (-(-t[0] // n) * n - t[0]) * count(t) // t[0] / n
                          for t in shapes if t[0] % n)
            assert abs(value - padding) <= 0.01 * padding + 1024, \
                f"{where}: padding {value} != {padding}"
    expected_fp32 = 2 * psi / (n if stage >= 2 else 1)
    assert fp32_gradients is not None and \
        abs(fp32_gradients - expected_fp32) <= 0.005 * expected_fp32 + 1, \
        f"{where}: fp32 gradients item {fp32_gradients}, expected 2Ψ{'/N' if stage >= 2 else ''}"
    total_formula = sum(formula.values())
    for state in formula:
        explained = formula[state] + extras[state]
        # 1%, of the larger side: amounts are printed to 3 significant digits.
        assert abs(planned[state] - explained) <= 0.01 * max(planned[state], formula[state]), \
            f"{where}: {state} planned {planned[state]} != formula + extras {explained}"
    assert unexplained <= 0.01 * total_formula, f"{where}: {unexplained} bytes not itemized"
    print(f"ok {where}: Ψ = {psi}, planned {sum(planned.values()) / 2**30:.2f} GiB = "
          f"formula {total_formula / 2**30:.2f} GiB + extras")


for name, shape in SHAPES.items():
    for n in (8, 64, 1024):
        for stage in (1, 2, 3):
            check(name, shape, n, stage)
