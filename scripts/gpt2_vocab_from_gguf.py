"""GPT-2's tokenizer files (vocab.json + merges.txt) from llama.cpp's
vocabulary-only GGUF of GPT-2 (models/ggml-vocab-gpt-2.gguf: the 50257
tokens and 50000 merges of the model's own files), with the 46 texts and
the ids transformers' GPT-2 tokenizer gives for them that llama.cpp keeps
beside it (ggml-vocab-gpt-2.gguf.inp/.out), copied as llamacpp-tests.inp
and llamacpp-tests.out.

  gpt2_vocab_from_gguf.py <ggml-vocab-gpt-2.gguf> <out-dir>
  gpt2_vocab_from_gguf.py --check <out-dir> <llmc-tokenize>
      compares llmc-tokenize's ids of the 46 texts with transformers'
"""
import json
import os
import shutil
import subprocess
import sys


def field_strings(reader, key):
    field = reader.fields[key]
    return [bytes(field.parts[i]).decode("utf-8") for i in field.data]


def write_vocab(gguf_path, out):
    import gguf  # only here: --check runs without it

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
    for ext in ("inp", "out"):
        shutil.copyfile(f"{gguf_path}.{ext}", os.path.join(out, f"llamacpp-tests.{ext}"))


def recorded_tests(out):
    """[(text, ids)] of llama.cpp's file pair: each text followed by a
    separator line, one line of ids per text."""
    sep = "\n__ggml_vocab_test__\n"
    with open(os.path.join(out, "llamacpp-tests.inp"), encoding="utf-8") as f:
        texts = f.read().split(sep)[:-1]
    with open(os.path.join(out, "llamacpp-tests.out"), encoding="utf-8") as f:
        ids = [[int(t) for t in line.split()] for line in f.read().split("\n")[:-1]]
    if not texts or len(texts) != len(ids):
        sys.exit(f"{out}/llamacpp-tests.inp/.out: {len(texts)} texts but {len(ids)} lines of ids")
    return list(zip(texts, ids))


def check(out, tokenize):
    tests = recorded_tests(out)
    run = subprocess.run([tokenize, out, "--json"], input=json.dumps([t for t, _ in tests]),
                         check=True, capture_output=True, text=True)
    bad = 0
    for i, ((text, want), got) in enumerate(zip(tests, json.loads(run.stdout)["ids"])):
        if got != want:
            bad += 1
            print(f"text {i} {text!r}: llmc {got}, transformers {want}", file=sys.stderr)
    if bad:
        sys.exit(f"{bad} of {len(tests)} texts tokenize differently from transformers' ids")
    print(f"# {len(tests)} texts tokenize as transformers' GPT-2 tokenizer does")


def main():
    if len(sys.argv) == 4 and sys.argv[1] == "--check":
        check(sys.argv[2], sys.argv[3])
    elif len(sys.argv) == 3:
        write_vocab(sys.argv[1], sys.argv[2])
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main()
