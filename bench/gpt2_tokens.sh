#!/usr/bin/env bash
# A text as GPT-2 token shards, through GPT-2's own tokenizer: its
# vocabulary and merges come from llama.cpp's vocabulary-only GGUF of GPT-2
# (in PyPI's llama-cpp-python 0.3.36 source, the one package index this
# machine reaches that carries them), written as vocab.json + merges.txt
# and checked against the ids transformers' GPT-2 tokenizer gives for
# llama.cpp's 46 test texts before any text is tokenized
# (bench/gpt2_vocab_from_gguf.py). Then `llmc-tokenize` and `llmc data`
# write OUT/shards/<name>_000000.bin (the first 90% of the tokens, the
# training set) and _000001.bin (the rest: `llmc-run` validates on a
# directory's last shard).
#
# Usage: [GGUF_PY=python-with-gguf] bench/gpt2_tokens.sh <text> <out-dir> [build-dir]
set -euo pipefail
TEXT=$1
OUT=$2
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BUILD=${3:-$ROOT/build}
SRC=$BUILD/gpt2-vocab-src # the sdist's three files, kept between runs
MODELS=llama_cpp_python-0.3.36/vendor/llama.cpp/models
VOCAB=$SRC/$MODELS/ggml-vocab-gpt-2.gguf

if [[ ! -f $VOCAB.out ]]; then
  mkdir -p "$SRC"
  pip download -q --no-deps --no-binary :all: llama-cpp-python==0.3.36 -d "$SRC"
  tar xzf "$SRC/llama_cpp_python-0.3.36.tar.gz" -C "$SRC" "$MODELS/ggml-vocab-gpt-2.gguf" \
    "$MODELS/ggml-vocab-gpt-2.gguf.inp" "$MODELS/ggml-vocab-gpt-2.gguf.out"
  rm "$SRC/llama_cpp_python-0.3.36.tar.gz"
fi
GGUF_PY=${GGUF_PY:-$BUILD/llamacpp-venv/bin/python}
if ! "$GGUF_PY" -c 'import gguf' 2>/dev/null; then
  GGUF_PY=$BUILD/gguf-venv/bin/python
  if ! "$GGUF_PY" -c 'import gguf' 2>/dev/null; then
    python3 -m venv "$BUILD/gguf-venv"
    "$BUILD/gguf-venv/bin/pip" install -q gguf==0.19.0 numpy
  fi
fi
"$GGUF_PY" "$ROOT/bench/gpt2_vocab_from_gguf.py" "$VOCAB" "$OUT/tokenizer" \
  --check "$BUILD/bin/llmc-tokenize"

"$BUILD/bin/llmc-tokenize" "$OUT/tokenizer" < "$TEXT" > "$OUT/ids.txt"
tokens=$(wc -w < "$OUT/ids.txt")
rm -rf "$OUT/shards"
mkdir -p "$OUT/shards"
"$BUILD/bin/llmc" data "$OUT/ids.txt" --from ids --vocab 50257 \
  --shard-tokens $(((tokens * 9 + 9) / 10)) -o "$OUT/shards/$(basename "${TEXT%.*}")"
rm "$OUT/ids.txt"
echo "# $TEXT: $tokens GPT-2 tokens in $OUT/shards"
