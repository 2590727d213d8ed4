#!/usr/bin/env bash
# Fetches the headers of cudnn-frontend, NVIDIA's header-only C++ library
# over cuDNN's graph API, through which the CUDA backend runs attention on
# cuDNN's fused flash attention (kernels/cuda/attention_cudnn.cpp,
# docs/cuda.md). The PyPI wheel `nvidia-cudnn-frontend` carries them in its
# include/ folder; it is downloaded (never installed) for one pinned release
# and platform, its hash checked, and include/ unpacked into
# <build>/deps/cudnn-frontend/include, where CMake looks for it. Optional:
# without network the build goes on without the cuDNN path (CMake says so)
# and attention runs on llmc's own kernels. Idempotent.
#
#   scripts/setup-cudnn-frontend.sh          # into build/deps/cudnn-frontend
#   BUILD_DIR=out scripts/setup-cudnn-frontend.sh
set -uo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BUILD_DIR=${BUILD_DIR:-$ROOT/build}
DEST=$BUILD_DIR/deps/cudnn-frontend
VERSION=1.32.0
# The headers are the same in every wheel of a release; this one is pinned
# so the hash is one.
WHEEL=nvidia_cudnn_frontend-$VERSION-cp311-cp311-manylinux_2_27_x86_64.manylinux_2_28_x86_64.whl
SHA256=c6006556017a4d1c914c52a556c71b1267f2d6a0500f742e7b4edef539878df0
PYTHON=${PYTHON:-/usr/bin/python3}

if [[ -f $DEST/VERSION && $(cat "$DEST/VERSION") == "$VERSION" && -f $DEST/include/cudnn_frontend.h ]]; then
  echo "setup-cudnn-frontend: cudnn-frontend $VERSION headers present in $DEST"
  exit 0
fi
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
if ! "$PYTHON" -m pip download -q --disable-pip-version-check --no-deps --only-binary=:all: \
       --platform manylinux_2_28_x86_64 --python-version 3.11 --implementation cp --abi cp311 \
       -d "$TMP" "nvidia-cudnn-frontend==$VERSION" > "$TMP/pip.log" 2>&1; then
  echo "setup-cudnn-frontend: could not download nvidia-cudnn-frontend==$VERSION" \
       "($(tail -1 "$TMP/pip.log")); building without cuDNN attention"
  exit 0
fi
if [[ $(sha256sum "$TMP/$WHEEL" 2>/dev/null | cut -d' ' -f1) != "$SHA256" ]]; then
  echo "setup-cudnn-frontend: $WHEEL is missing or its sha256 is not $SHA256; building" \
       "without cuDNN attention" >&2
  exit 0
fi
rm -rf "$DEST"
mkdir -p "$DEST"
"$PYTHON" - "$TMP/$WHEEL" "$DEST" <<'EOF'
import sys, zipfile
wheel, dest = sys.argv[1], sys.argv[2]
with zipfile.ZipFile(wheel) as z:
    z.extractall(dest, [n for n in z.namelist() if n.startswith("include/")])
EOF
echo "$VERSION" > "$DEST/VERSION"
echo "setup-cudnn-frontend: cudnn-frontend $VERSION headers ($(find "$DEST/include" -name '*.h' | wc -l) files) in $DEST"
