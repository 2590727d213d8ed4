#!/usr/bin/env bash
# GPT-2's own tokenizer files in BUILD_DIR/gpt2-vocab (vocab.json,
# merges.txt, and llama.cpp's 46 texts with transformers' ids for them),
# for test/reference/hf_tokenizer.py and bench/gpt2_tokens.sh. The
# Hugging Face hub is out of reach here; PyPI is not, and the source of
# llama-cpp-python 0.3.36 carries llama.cpp's vocabulary-only GGUF of
# GPT-2, which scripts/gpt2_vocab_from_gguf.py turns into the files.
# Reads the GGUF with the `gguf` package, installed into hf-venv (or a
# venv of its own without one). Idempotent; exits non-zero, saying why,
# where PyPI cannot be reached.
#
#   scripts/fetch-gpt2-vocab.sh            # into build/gpt2-vocab
#   BUILD_DIR=out scripts/fetch-gpt2-vocab.sh
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BUILD_DIR=${BUILD_DIR:-$ROOT/build}
OUT=$BUILD_DIR/gpt2-vocab
if [[ -f $OUT/merges.txt && -f $OUT/llamacpp-tests.out ]]; then
  echo "fetch-gpt2-vocab: GPT-2's vocabulary present in $OUT"
  exit 0
fi

VENV=$BUILD_DIR/hf-venv
[[ -x $VENV/bin/python ]] || VENV=$BUILD_DIR/gguf-venv
[[ -x $VENV/bin/python ]] || python3 -m venv "$VENV"
"$VENV/bin/python" -c 'import gguf' 2>/dev/null ||
  "$VENV/bin/pip" install -q --disable-pip-version-check gguf==0.19.0

TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
MODELS=llama_cpp_python-0.3.36/vendor/llama.cpp/models
# The source package straight from PyPI's file host, found in its simple
# index and checked against the sha256 the link names (pip download would
# first build the package's metadata: five minutes on 2 cores).
python3 - "$TMP" <<'PY'
import hashlib, re, sys, urllib.error, urllib.request
name = "llama_cpp_python-0.3.36.tar.gz"
def get(url, timeout):
    try:
        return urllib.request.urlopen(url, timeout=timeout).read()
    except (urllib.error.URLError, OSError) as e:
        sys.exit(f"fetch-gpt2-vocab: cannot read {url}: {e}")
index = get("https://pypi.org/simple/llama-cpp-python/", 60).decode()
link = re.search(r'href="([^"#]*/' + re.escape(name) + r')#sha256=([0-9a-f]{64})"', index)
if not link:
    sys.exit(f"fetch-gpt2-vocab: no {name} in PyPI's index")
data = get(link.group(1), 600)
if hashlib.sha256(data).hexdigest() != link.group(2):
    sys.exit(f"fetch-gpt2-vocab: {name}: sha256 differs from the one PyPI lists")
open(f"{sys.argv[1]}/{name}", "wb").write(data)
PY
tar xzf "$TMP/llama_cpp_python-0.3.36.tar.gz" -C "$TMP" "$MODELS/ggml-vocab-gpt-2.gguf" \
  "$MODELS/ggml-vocab-gpt-2.gguf.inp" "$MODELS/ggml-vocab-gpt-2.gguf.out"
"$VENV/bin/python" "$ROOT/scripts/gpt2_vocab_from_gguf.py" "$TMP/$MODELS/ggml-vocab-gpt-2.gguf" \
  "$TMP/gpt2-vocab"
rm -rf "$OUT"
mv "$TMP/gpt2-vocab" "$OUT"
echo "fetch-gpt2-vocab: wrote GPT-2's vocabulary to $OUT"
