"""llama.cpp (llama-cpp-python) batch-1 greedy decode of a GGUF file from
given prompt token ids: prints `prefill <tokens> <seconds>` and `decode
<tokens> <seconds>`, the decode loop being one llama_decode of one token
and an argmax of its logits per new token, as `llmc generate
--temperature 0` does.

Usage: llamacpp_decode.py <model.gguf> --prompt-tokens 1,2,3 --new 32 --threads 2
"""
import argparse
import time

import numpy as np
from llama_cpp import Llama


def next_token(llm):
    """The argmax of the last evaluated token's logits (llama.cpp keeps only
    those without logits_all)."""
    logits = np.ctypeslib.as_array(llm._ctx.get_logits(), shape=(llm.n_vocab(),))
    return int(np.argmax(logits))


def main():
    p = argparse.ArgumentParser()
    p.add_argument("model")
    p.add_argument("--prompt-tokens", required=True)
    p.add_argument("--new", type=int, default=32)
    p.add_argument("--threads", type=int, default=2)
    a = p.parse_args()
    prompt = [int(t) for t in a.prompt_tokens.split(",")]
    llm = Llama(model_path=a.model, n_ctx=len(prompt) + a.new + 16, n_batch=len(prompt),
                n_threads=a.threads, n_threads_batch=a.threads, logits_all=False, verbose=False)
    start = time.perf_counter()
    llm.eval(prompt)
    prefill = time.perf_counter() - start
    token = next_token(llm)
    start = time.perf_counter()
    for _ in range(a.new - 1):
        llm.eval([token])
        token = next_token(llm)
    decode = time.perf_counter() - start
    print(f"prefill {len(prompt)} {prefill:.6f}")
    print(f"decode {a.new - 1} {decode:.6f}")


if __name__ == "__main__":
    main()
