#!/usr/bin/env bash
# A text as GPT-2 token shards, through GPT-2's own tokenizer: its files
# from scripts/fetch-gpt2-vocab.sh (llama.cpp's vocabulary GGUF of GPT-2,
# from PyPI), checked against the ids transformers' GPT-2 tokenizer gives
# for llama.cpp's 46 test texts before any text is tokenized. Then
# `llmc-tokenize` and `llmc data` write OUT/shards/<name>_000000.bin (the
# first 90% of the tokens, the training set) and _000001.bin (the rest:
# `llmc-run` validates on a directory's last shard).
#
# Usage: bench/gpt2_tokens.sh <text> <out-dir> [build-dir]
set -euo pipefail
TEXT=$1
OUT=$2
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BUILD=${3:-$ROOT/build}
VOCAB=$BUILD/gpt2-vocab

BUILD_DIR=$BUILD "$ROOT/scripts/fetch-gpt2-vocab.sh"
python3 "$ROOT/scripts/gpt2_vocab_from_gguf.py" --check "$VOCAB" "$BUILD/bin/llmc-tokenize"
mkdir -p "$OUT"
"$BUILD/bin/llmc-tokenize" "$VOCAB" < "$TEXT" > "$OUT/ids.txt"
tokens=$(wc -w < "$OUT/ids.txt")
rm -rf "$OUT/shards"
mkdir -p "$OUT/shards"
"$BUILD/bin/llmc" data "$OUT/ids.txt" --from ids --vocab 50257 \
  --shard-tokens $(((tokens * 9 + 9) / 10)) -o "$OUT/shards/$(basename "${TEXT%.*}")"
rm "$OUT/ids.txt"
echo "# $TEXT: $tokens GPT-2 tokens in $OUT/shards"
