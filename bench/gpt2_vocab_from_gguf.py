"""GPT-2's tokenizer as a Hugging Face directory (vocab.json + merges.txt),
read from llama.cpp's vocabulary-only GGUF of GPT-2
(models/ggml-vocab-gpt-2.gguf: its 50257 tokens and 50000 merges, as the
model's own files list them). llama.cpp ships beside it the ids that
transformers' GPT-2 tokenizer gives for 46 texts (the .inp and .out files);
--check compares `llmc-tokenize` on the written directory with them.

Usage: gpt2_vocab_from_gguf.py <ggml-vocab-gpt-2.gguf> <out-dir> [--check llmc-tokenize]
"""
import argparse
import json
import os
import subprocess
import sys

import gguf


def field_strings(reader, key):
    field = reader.fields[key]
    return [bytes(field.parts[i]).decode("utf-8") for i in field.data]


def write_vocab(gguf_path, out):
    reader = gguf.GGUFReader(gguf_path)
    model = bytes(reader.fields["tokenizer.ggml.model"].parts[-1]).decode()
    if model != "gpt2":
        sys.exit(f"{gguf_path}: tokenizer.ggml.model is {model!r}, expected 'gpt2'")
    tokens = field_strings(reader, "tokenizer.ggml.tokens")
    merges = field_strings(reader, "tokenizer.ggml.merges")
    if len(tokens) != 50257 or len(merges) != 50000:
        sys.exit(f"{gguf_path}: {len(tokens)} tokens and {len(merges)} merges, "
                 "expected GPT-2's 50257 and 50000")
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, "vocab.json"), "w", encoding="utf-8") as f:
        json.dump({t: i for i, t in enumerate(tokens)}, f, ensure_ascii=False)
    with open(os.path.join(out, "merges.txt"), "w", encoding="utf-8") as f:
        f.write("#version: 0.2\n" + "\n".join(merges) + "\n")


def check(gguf_path, out, tokenize):
    """Compares llmc-tokenize's ids with the ones llama.cpp recorded."""
    # Each text is followed by a separator line; each line of ids ends in "\n".
    sep = "\n__ggml_vocab_test__\n"
    with open(gguf_path + ".inp", encoding="utf-8") as f:
        texts = f.read().split(sep)[:-1]
    with open(gguf_path + ".out", encoding="utf-8") as f:
        expected = f.read().split("\n")[:-1]
    if not texts or len(texts) != len(expected):
        sys.exit(f"{gguf_path}.inp/.out: {len(texts)} texts but {len(expected)} lines of ids")
    bad = 0
    for i, text in enumerate(texts):
        want = expected[i].split()
        got = subprocess.run([tokenize, out, text], check=True, capture_output=True,
                             text=True).stdout.split()
        if got != want:
            bad += 1
            print(f"text {i} {text!r}: llmc {got}, transformers {want}", file=sys.stderr)
    if bad:
        sys.exit(f"{bad} of {len(texts)} texts tokenize differently from transformers' ids")
    print(f"# {len(texts)} texts tokenize as transformers' GPT-2 tokenizer does")


def main():
    p = argparse.ArgumentParser()
    p.add_argument("gguf")
    p.add_argument("out")
    p.add_argument("--check", metavar="LLMC_TOKENIZE")
    a = p.parse_args()
    write_vocab(a.gguf, a.out)
    if a.check:
        check(a.gguf, a.out, a.check)


if __name__ == "__main__":
    main()
