"""JAX `jit` (XLA) baseline for bench/tiny_gpt.sh: the GPT-2 of
test/reference/torch_reference.py's gpt2_loss (pre-LN, tanh GELU, causal
attention, head tied to wte), with the same batch, AdamW and gradient
clipping as the llmc and PyTorch runs, the whole step (loss, gradients,
clipping, optimizer) compiled as one XLA program. Prints the median step
over the timed steps (after warm-up) as JSON, like torch_tiny_gpt.py.

Run with the venv scripts/setup-jax.sh makes (build/jax-venv)."""
import json
import math
import os
import time

from gpt_bench_args import parse_args


def main():
    args = parse_args()
    # XLA's CPU client sizes its thread pool from the cores the process may
    # run on: restrict those to the count the other runs get before jax is
    # imported.
    os.sched_setaffinity(0, sorted(os.sched_getaffinity(0))[:args.threads])

    import jax
    import jax.numpy as jnp

    C, L, V, T, B, H = args.n_embd, args.n_layer, args.vocab, args.seq, args.batch, args.n_head
    D = C // H
    key = jax.random.PRNGKey(0)

    def normal(shape):
        nonlocal key
        key, sub = jax.random.split(key)
        return jax.random.normal(sub, shape, jnp.float32) * 0.02

    p = {"wte": normal((V, C)), "wpe": normal((T, C)),
         "ln_f_w": jnp.ones(C), "ln_f_b": jnp.zeros(C), "h": []}
    for _ in range(L):
        p["h"].append({"ln_1_w": jnp.ones(C), "ln_1_b": jnp.zeros(C),
                       "c_attn_w": normal((C, 3 * C)), "c_attn_b": jnp.zeros(3 * C),
                       "c_proj_w": normal((C, C)), "c_proj_b": jnp.zeros(C),
                       "ln_2_w": jnp.ones(C), "ln_2_b": jnp.zeros(C),
                       "c_fc_w": normal((C, 4 * C)), "c_fc_b": jnp.zeros(4 * C),
                       "mlp_proj_w": normal((4 * C, C)), "mlp_proj_b": jnp.zeros(C)})

    def layer_norm(x, w, b, eps=1e-5):
        mean = x.mean(-1, keepdims=True)
        var = ((x - mean) ** 2).mean(-1, keepdims=True)
        return (x - mean) * jax.lax.rsqrt(var + eps) * w + b

    def loss_fn(p, tokens, targets):
        x = p["wte"][tokens] + p["wpe"][:T]
        for l in p["h"]:
            h = layer_norm(x, l["ln_1_w"], l["ln_1_b"])
            qkv = h @ l["c_attn_w"] + l["c_attn_b"]
            q, k, v = (qkv[..., i * C:(i + 1) * C].reshape(B, T, H, D) for i in range(3))
            a = jax.nn.dot_product_attention(q, k, v, scale=1.0 / math.sqrt(D), is_causal=True)
            x = x + a.reshape(B, T, C) @ l["c_proj_w"] + l["c_proj_b"]
            h = layer_norm(x, l["ln_2_w"], l["ln_2_b"])
            f = jax.nn.gelu(h @ l["c_fc_w"] + l["c_fc_b"], approximate=True)
            x = x + f @ l["mlp_proj_w"] + l["mlp_proj_b"]
        x = layer_norm(x, p["ln_f_w"], p["ln_f_b"])
        logits = x @ p["wte"].T
        logp = jax.nn.log_softmax(logits, axis=-1)
        return -jnp.take_along_axis(logp, targets[..., None], axis=-1).mean()

    lr, b1, b2, eps, wd = 1e-3, 0.9, 0.95, 1e-8, 0.1

    def step(p, m, v, t, tokens, targets):
        loss, g = jax.value_and_grad(loss_fn)(p, tokens, targets)
        leaves = jax.tree_util.tree_leaves(g)
        norm = jnp.sqrt(sum(jnp.sum(x * x) for x in leaves))
        g = jax.tree_util.tree_map(lambda x: x * jnp.minimum(1.0, 1.0 / (norm + 1e-6)), g)
        t = t + 1
        m = jax.tree_util.tree_map(lambda m, g: b1 * m + (1 - b1) * g, m, g)
        v = jax.tree_util.tree_map(lambda v, g: b2 * v + (1 - b2) * g * g, v, g)
        c1, c2 = 1 - b1 ** t, 1 - b2 ** t
        p = jax.tree_util.tree_map(
            lambda p, m, v: p * (1 - lr * wd) - lr * (m / c1) / (jnp.sqrt(v / c2) + eps), p, m, v)
        return loss, p, m, v, t

    train_step = jax.jit(step, donate_argnums=(0, 1, 2))
    m = jax.tree_util.tree_map(jnp.zeros_like, p)
    v = jax.tree_util.tree_map(jnp.zeros_like, p)
    t = jnp.zeros((), jnp.float32)
    tokens = jax.random.randint(jax.random.PRNGKey(1), (B, T), 0, V)
    targets = jax.random.randint(jax.random.PRNGKey(2), (B, T), 0, V)
    times = []
    for _ in range(args.warmup + args.steps):
        t0 = time.perf_counter()
        loss, p, m, v, t = train_step(p, m, v, t, tokens, targets)
        loss.block_until_ready()
        times.append(time.perf_counter() - t0)
    timed = sorted(times[args.warmup:])
    median = timed[len(timed) // 2]
    print(json.dumps({"tokens_per_s": B * T / median, "median_ms": median * 1000,
                      "jax": jax.__version__, "threads": args.threads,
                      "loss": float(loss)}))


if __name__ == "__main__":
    main()
