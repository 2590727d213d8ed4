#!/usr/bin/python3
"""PyTorch reference for llmc: the same model, weights, data and optimizer.

Checks, against an independent implementation we did not derive from llmc's
IR, that
  1. the loss and every parameter gradient llmc computes for one batch match
     PyTorch's autograd (fp32, per-tensor relative error <= --grad-tol), and
  2. the losses of an llmc training run (its --metrics JSONL) match PyTorch
     training from the same initial weights with torch.optim.AdamW, gradient
     clipping and the same data order.

Needs Debian's python3-torch (run with /usr/bin/python3). Exits 0 on success,
1 on a mismatch, 77 when torch is missing (ctest reports that as skipped).
"""
import argparse
import json
import math
import struct
import sys

try:
    import numpy as np
    import torch
    import torch.nn.functional as F
except ImportError as e:  # pragma: no cover
    print(f"SKIP: PyTorch not available ({e}); install python3-torch")
    sys.exit(77)

torch.set_num_threads(2)
torch.manual_seed(0)

DTYPES = {"F32": np.float32, "I32": np.int32, "BF16": np.uint16, "F64": np.float64, "I64": np.int64}


def read_safetensors(path):
    with open(path, "rb") as f:
        data = f.read()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + n])
    meta = header.pop("__metadata__", {})
    base = 8 + n
    tensors = {}
    for name, entry in header.items():
        begin, end = entry["data_offsets"]
        arr = np.frombuffer(data[base + begin:base + end], dtype=DTYPES[entry["dtype"]])
        tensors[name] = arr.reshape(entry["shape"]).copy()
    return tensors, meta


# --- fp8 training (--precision fp8's recipe) ---------------------------------
#
# Transformer Engine's hybrid recipe with current per-tensor scaling: a
# linear layer's input and weight are fake-quantized to E4M3, the gradient
# of its output to E5M2, each with scale = amax / max (fp32, as torchao's
# tensorwise scaling), and the matmuls run on the dequantized values in fp32.
# Casts: torch.float8_* where this torch has them (2.1+), else the nearest
# value of the format found by search over its values (ties to the even
# code, saturating: clamp to +-max first, as torchao's to_fp8_saturated).

FP8 = {"e4m3": (3, 7, 448.0), "e5m2": (2, 15, 57344.0)}


def fp8_values(fmt):
    """The format's non-negative finite values, ascending: index = code."""
    mbits, bias, top = FP8[fmt]
    values = [m * 2.0 ** (1 - bias - mbits) for m in range(1 << mbits)]  # subnormals
    e = 1
    while True:
        for m in range(1 << mbits):
            v = (1 + m / (1 << mbits)) * 2.0 ** (e - bias)
            if v > top:
                return torch.tensor(values, dtype=torch.float64)
            values.append(v)
        e += 1


def fp8_cast(v, fmt):
    """v (fp32) rounded to the fp8 format, saturating."""
    top = FP8[fmt][2]
    dtype = getattr(torch, {"e4m3": "float8_e4m3fn", "e5m2": "float8_e5m2"}[fmt], None)
    v = v.clamp(-top, top)
    if dtype is not None:
        return v.to(dtype).to(torch.float32)
    grid = fp8_values(fmt)
    a = v.abs().double()
    i = torch.searchsorted(grid, a).clamp(1, len(grid) - 1)
    lo, hi = grid[i - 1], grid[i]
    up = (hi - a < a - lo) | ((hi - a == a - lo) & (i % 2 == 0))
    return (torch.where(up, hi, lo) * torch.sign(v.double())).to(torch.float32)


def fake_quant(x, fmt):
    amax = x.abs().max()
    if not amax > 0:
        return torch.zeros_like(x)
    scale = amax / FP8[fmt][2]
    return fp8_cast(x / scale, fmt) * scale


class Fp8Linear(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, w):
        xq, wq = fake_quant(x, "e4m3"), fake_quant(w, "e4m3")
        ctx.save_for_backward(xq, wq)
        return xq @ wq

    @staticmethod
    def backward(ctx, dy):
        xq, wq = ctx.saved_tensors
        dyq = fake_quant(dy, "e5m2")
        dx = dyq @ wq.T
        dw = xq.reshape(-1, xq.shape[-1]).T @ dyq.reshape(-1, dyq.shape[-1])
        return dx, dw


# --- fp8 delayed scaling (--fp8-scaling delayed) -----------------------------
#
# Transformer Engine's DelayedScaling recipe, as TE (transformer_engine/
# pytorch/fp8.py) writes it: each tensor has an amax history whose slot 0
# receives the current step's amax while the tensor is cast with the scale
# of the previous update (x * scale, cast, times scale_inv = 1 / scale);
# after the step, amax = max(history) or history[0] (most_recent), the
# history is rolled by one and slot 0 zeroed, and
#   scale = (fp8_max / amax) / 2 ** margin,
# kept where amax is 0 or not finite. The scale starts at 1. The gradient
# of an input or weight passes whole, as through TE's fp8 GEMM backward.

class DelayedScaler:
    def __init__(self, fmt, history, margin, algo):
        self.fmt, self.margin, self.algo = fmt, margin, algo
        self.amax_history = torch.zeros(history, dtype=torch.float32)
        self.scale = torch.ones((), dtype=torch.float32)

    def quantize(self, x):
        self.amax_history[0] = torch.maximum(self.amax_history[0], x.detach().abs().max())
        return fp8_cast(x * self.scale, self.fmt) * (1.0 / self.scale)

    def update(self):
        if self.algo == "max":
            amax = torch.max(self.amax_history, dim=0).values
        else:
            amax = self.amax_history[0].clone()
        if self.amax_history.shape[0] > 1:
            self.amax_history = torch.roll(self.amax_history, -1, 0)
        self.amax_history[0] = 0.0
        sf = (FP8[self.fmt][2] / amax) / (2 ** self.margin)
        sf = torch.where(amax > 0.0, sf, self.scale)
        self.scale = torch.where(torch.isfinite(amax), sf, self.scale)


class DelayedFp8:
    """The scalers of every linear layer, keyed by its weight's storage."""
    def __init__(self, history, margin, algo):
        self.config = (history, margin, algo)
        self.scalers = {}

    def of(self, w):
        key = w.data_ptr()
        if key not in self.scalers:
            self.scalers[key] = {role: DelayedScaler(fmt, *self.config)
                                 for role, fmt in (("x", "e4m3"), ("w", "e4m3"), ("dy", "e5m2"))}
        return self.scalers[key]

    def update(self):
        for scalers in self.scalers.values():
            for scaler in scalers.values():
                scaler.update()

    def compare(self, params, checkpoint, tol):
        """Each of llmc's histories (qat_state/<weight>[.input|.output_grad]
        in a checkpoint: the range fp8_max / scale, then the amaxes, newest
        first) against the scaler of that weight's tensor: the range
        (relative error <= tol) and the N - 1 amaxes TE's history holds
        beside its zeroed slot. The amaxes are of tensors that drift apart
        as the losses do; a wrong margin or algorithm is off by 2x or more."""
        import glob
        import os
        states = {}
        for path in glob.glob(os.path.join(checkpoint, "*.safetensors")):
            states.update({k[len("qat_state/"):]: v for k, v in read_safetensors(path)[0].items()
                           if k.startswith("qat_state/")})
        suffix = {"x": ".input", "w": "", "dy": ".output_grad"}
        compared, worst, ok = 0, 0.0, True
        for name, p in params.items():
            for role, scaler in self.scalers.get(p.data_ptr(), {}).items():
                state = states.get(name + suffix[role])
                if state is None:
                    continue  # inputs shared by several layers have one history
                ours = torch.tensor(state.astype(np.float64))
                n = scaler.amax_history.shape[0]
                theirs = torch.cat([FP8[scaler.fmt][2] / scaler.scale.double().reshape(1),
                                    scaler.amax_history[1:].double().flip(0)])
                err = ((ours[:n] - theirs).abs() / theirs.abs().clamp(min=1e-30)).max().item()
                worst, compared = max(worst, err), compared + 1
                if err > tol:
                    print(f"MISMATCH: history {name}{suffix[role]}: llmc {ours[:n].tolist()} "
                          f"torch {theirs.tolist()}")
                    ok = False
        print(f"histories: {compared} compared, worst relative error {worst:.3e}")
        return ok and compared > 0


class DelayedFp8Linear(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, w, scalers):
        xq, wq = scalers["x"].quantize(x), scalers["w"].quantize(w)
        ctx.save_for_backward(xq, wq)
        ctx.scalers = scalers
        return xq @ wq

    @staticmethod
    def backward(ctx, dy):
        xq, wq = ctx.saved_tensors
        dyq = ctx.scalers["dy"].quantize(dy)
        dx = dyq @ wq.T
        dw = xq.reshape(-1, xq.shape[-1]).T @ dyq.reshape(-1, dyq.shape[-1])
        return dx, dw, None


delayed = None  # the DelayedFp8 of a --fp8-delayed run


def delayed_linear(x, w):
    return DelayedFp8Linear.apply(x, w, delayed.of(w))


LINEAR = {"fp32": lambda x, w: x @ w, "fp8": Fp8Linear.apply, "fp8-delayed": delayed_linear}
linear = LINEAR["fp32"]


# --- models: functional, over llmc's parameter names -------------------------

def attention(q, k, v, scale):
    # q [B,T,H,D], k/v [B,T,KV,D]; causal; query head h reads kv head h // (H/KV)
    h, kv = q.shape[2], k.shape[2]
    if kv != h:
        k = k.repeat_interleave(h // kv, dim=2)
        v = v.repeat_interleave(h // kv, dim=2)
    q, k, v = (t.transpose(1, 2) for t in (q, k, v))
    s = torch.matmul(q, k.transpose(-1, -2)) * scale
    t = s.shape[-1]
    mask = torch.ones(t, t, dtype=torch.bool).tril()
    s = s.masked_fill(~mask, float("-inf"))
    return torch.matmul(torch.softmax(s, dim=-1), v).transpose(1, 2)


def gpt2_loss(p, cfg, tokens, targets):
    B, T = tokens.shape
    C, H = cfg["n_embd"], cfg["n_head"]
    D = C // H
    x = p["wte.weight"][tokens] + p["wpe.weight"][:T]
    for l in range(cfg["n_layer"]):
        pre = f"h.{l}."
        h = F.layer_norm(x, (C,), p[pre + "ln_1.weight"], p[pre + "ln_1.bias"], cfg["eps"])
        qkv = linear(h, p[pre + "attn.c_attn.weight"]) + p[pre + "attn.c_attn.bias"]
        q, k, v = (qkv[..., i * C:(i + 1) * C].reshape(B, T, H, D) for i in range(3))
        a = attention(q, k, v, 1.0 / math.sqrt(D)).reshape(B, T, C)
        x = x + linear(a, p[pre + "attn.c_proj.weight"]) + p[pre + "attn.c_proj.bias"]
        h = F.layer_norm(x, (C,), p[pre + "ln_2.weight"], p[pre + "ln_2.bias"], cfg["eps"])
        f = F.gelu(linear(h, p[pre + "mlp.c_fc.weight"]) + p[pre + "mlp.c_fc.bias"], approximate="tanh")
        x = x + linear(f, p[pre + "mlp.c_proj.weight"]) + p[pre + "mlp.c_proj.bias"]
    x = F.layer_norm(x, (C,), p["ln_f.weight"], p["ln_f.bias"], cfg["eps"])
    head = p.get("lm_head.weight", p["wte.weight"])
    logits = x @ head.T
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1))


def rms_norm(x, g, eps):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * g


def rope(x, theta):
    # x [B,T,H,D]; rotate (x[i], x[i+D/2]) by t * theta^(-2i/D)  (HF rotate_half)
    B, T, H, D = x.shape
    inv = theta ** (-torch.arange(0, D // 2, dtype=torch.float64) * 2 / D)
    ang = torch.arange(T, dtype=torch.float64)[:, None] * inv[None, :]
    cos = torch.cos(ang).to(x.dtype)[None, :, None, :]
    sin = torch.sin(ang).to(x.dtype)[None, :, None, :]
    x1, x2 = x[..., :D // 2], x[..., D // 2:]
    return torch.cat([x1 * cos - x2 * sin, x2 * cos + x1 * sin], dim=-1)


def llama_loss(p, cfg, tokens, targets):
    B, T = tokens.shape
    C, H, KV = cfg["n_embd"], cfg["n_head"], cfg["n_kv_head"]
    D = C // H
    x = p["embed_tokens.weight"][tokens]
    for l in range(cfg["n_layer"]):
        pre = f"layers.{l}."
        h = rms_norm(x, p[pre + "input_layernorm.weight"], cfg["eps"])
        q = rope(linear(h, p[pre + "self_attn.q_proj.weight"].T).reshape(B, T, H, D), cfg["theta"])
        k = rope(linear(h, p[pre + "self_attn.k_proj.weight"].T).reshape(B, T, KV, D), cfg["theta"])
        v = linear(h, p[pre + "self_attn.v_proj.weight"].T).reshape(B, T, KV, D)
        a = attention(q, k, v, 1.0 / math.sqrt(D)).reshape(B, T, H * D)
        x = x + linear(a, p[pre + "self_attn.o_proj.weight"].T)
        h = rms_norm(x, p[pre + "post_attention_layernorm.weight"], cfg["eps"])
        g = F.silu(linear(h, p[pre + "mlp.gate_proj.weight"].T)) * linear(h, p[pre + "mlp.up_proj.weight"].T)
        x = x + linear(g, p[pre + "mlp.down_proj.weight"].T)
    x = rms_norm(x, p["norm.weight"], cfg["eps"])
    head = p.get("lm_head.weight", p["embed_tokens.weight"])
    logits = x @ head.T
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1))


# --- data: llmc's DataLoader, re-implemented from its specification ----------

MASK = (1 << 64) - 1


def splitmix64(state):
    state = (state + 0x9E3779B97F4A7C15) & MASK
    z = state
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK
    return state, z ^ (z >> 31)


class DataLoader:
    def __init__(self, tokens, T, seed):
        self.tokens, self.T, self.seed = tokens, T, seed
        self.windows = (len(tokens) - 1) // T
        self.epoch, self.perm = -1, None

    def permutation(self, epoch):
        if epoch != self.epoch:
            perm = list(range(self.windows))
            state = (self.seed * 0xD1B54A32D192ED03 + epoch) & MASK
            for i in range(self.windows - 1, 0, -1):
                state, r = splitmix64(state)
                j = r % (i + 1)
                perm[i], perm[j] = perm[j], perm[i]
            self.epoch, self.perm = epoch, perm
        return self.perm

    def batch(self, index, rows):
        x, y = [], []
        for r in range(rows):
            s = index * rows + r
            w = self.permutation(s // self.windows)[s % self.windows]
            chunk = self.tokens[w * self.T: w * self.T + self.T + 1]
            x.append(chunk[:-1])
            y.append(chunk[1:])
        return torch.tensor(np.array(x), dtype=torch.long), torch.tensor(np.array(y), dtype=torch.long)


def relative_error(a, b):
    a, b = a.double(), b.double()
    return (torch.linalg.norm(a - b) / max(torch.linalg.norm(b).item(), 1e-30)).item()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--family", choices=["gpt2", "llama"], required=True)
    ap.add_argument("--config", required=True, help="JSON: n_layer, n_head, n_kv_head, n_embd, eps, theta")
    ap.add_argument("--dump", required=True, help="llmc-run --dump-grads output")
    ap.add_argument("--metrics", help="llmc-run --metrics JSONL of a run from the same weights")
    ap.add_argument("--data", help="the text file llmc trained on")
    ap.add_argument("--seq-len", type=int)
    ap.add_argument("--rows", type=int, help="rows per step (microbatches x batch)")
    ap.add_argument("--seed", type=int, default=1337)
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--weight-decay", type=float, default=0.1)
    ap.add_argument("--betas", default="0.9,0.95")
    ap.add_argument("--eps", type=float, default=1e-8)
    ap.add_argument("--max-grad-norm", type=float, default=1.0)
    ap.add_argument("--grad-tol", type=float, default=1e-4)
    ap.add_argument("--loss-tol", type=float, default=1e-4)
    ap.add_argument("--fp8", action="store_true",
                    help="the blocks' linear layers in fp8 (--precision fp8's recipe)")
    ap.add_argument("--fp8-delayed", metavar="HISTORY,MARGIN,ALGO",
                    help="with --fp8: Transformer Engine's delayed scaling, e.g. 16,1,max")
    ap.add_argument("--histories", metavar="STEP_DIR",
                    help="with --fp8-delayed and --metrics: an llmc checkpoint of the run, "
                         "whose amax histories must match the scalers' after its step")
    ap.add_argument("--history-tol", type=float, default=1e-2)
    args = ap.parse_args()
    global linear, delayed
    linear = LINEAR["fp8" if args.fp8 else "fp32"]
    if args.fp8_delayed:
        history, margin, algo = args.fp8_delayed.split(",")
        linear = LINEAR["fp8-delayed"]
        delayed = DelayedFp8(int(history), int(margin), algo)
    cfg = json.loads(args.config)
    loss_fn = gpt2_loss if args.family == "gpt2" else llama_loss

    dump, meta = read_safetensors(args.dump)
    params = {k: torch.tensor(v, requires_grad=True) for k, v in dump.items()
              if not k.startswith("grad/") and k not in ("tokens", "targets")}
    tokens = torch.tensor(dump["tokens"].astype(np.int64))
    targets = torch.tensor(dump["targets"].astype(np.int64))

    # 1. Loss and gradients of one batch.
    loss = loss_fn(params, cfg, tokens, targets)
    loss.backward()
    ok = True
    llmc_loss = float(meta["loss"])
    print(f"loss: llmc {llmc_loss:.7f} torch {loss.item():.7f}")
    if abs(llmc_loss - loss.item()) > args.loss_tol * max(1.0, abs(loss.item())):
        print("MISMATCH: loss")
        ok = False
    worst = 0.0
    for name, p in params.items():
        ours = torch.tensor(dump["grad/" + name])
        err = relative_error(ours, p.grad)
        worst = max(worst, err)
        if err > args.grad_tol:
            print(f"MISMATCH: gradient of {name}: relative error {err:.3e}")
            ok = False
    print(f"gradients: {len(params)} tensors, worst relative error {worst:.3e}")

    # 2. Training losses (delayed scaling: from fresh histories, as llmc's).
    if args.metrics:
        if delayed:
            delayed.scalers = {}
        if args.histories:
            state = json.load(open(args.histories + "/state.json"))
            histories_step = int(state["step"])
        steps = [json.loads(line) for line in open(args.metrics)]
        text = open(args.data, "rb").read()
        data = np.frombuffer(text, dtype=np.uint8).astype(np.int64)
        holdout = max(len(data) // 10, args.seq_len + 1)
        loader = DataLoader(data[:len(data) - holdout], args.seq_len, args.seed)
        train = {k: torch.tensor(v, requires_grad=True) for k, v in dump.items()
                 if not k.startswith("grad/") and k not in ("tokens", "targets")}
        decay = [p for k, p in train.items() if p.dim() >= 2]
        no_decay = [p for k, p in train.items() if p.dim() < 2]
        b1, b2 = (float(b) for b in args.betas.split(","))
        opt = torch.optim.AdamW([{"params": decay, "weight_decay": args.weight_decay},
                                 {"params": no_decay, "weight_decay": 0.0}],
                                lr=args.lr, betas=(b1, b2), eps=args.eps)
        worst = 0.0
        for i, record in enumerate(steps):
            x, y = loader.batch(record["step"] - 1, args.rows)
            opt.zero_grad()
            l = loss_fn(train, cfg, x, y)
            l.backward()
            if args.max_grad_norm > 0:
                torch.nn.utils.clip_grad_norm_(list(train.values()), args.max_grad_norm)
            opt.step()
            if delayed:
                delayed.update()
                if args.histories and record["step"] == histories_step:
                    ok = delayed.compare(train, args.histories, args.history_tol) and ok
            diff = abs(l.item() - record["loss"])
            worst = max(worst, diff)
            print(f"step {record['step']:3d}: llmc {record['loss']:.6f} torch {l.item():.6f} |diff| {diff:.2e}")
            if diff > args.loss_tol * max(1.0, abs(l.item())):
                print(f"MISMATCH: loss at step {record['step']}")
                ok = False
        print(f"training: {len(steps)} steps, worst |loss difference| {worst:.3e}")
    print("PASS" if ok else "FAIL")
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
