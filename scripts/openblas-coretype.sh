# Sourced. Exports OPENBLAS_CORETYPE=SkylakeX where llmc loads OpenBLAS
# with it (kernels/cpu/blas.cpp: the variable unset and the CPU having
# AVX-512 F, BW, DQ and VL), so that another program of the same run —
# PyTorch, whose Debian build links OpenBLAS — multiplies with llmc's
# kernels: its own detection falls back to SSE3 kernels on Sapphire Rapids
# and takes its AVX2 Zen ones on Zen 4. A value already set wins.
# shellcheck shell=bash
if [[ -z ${OPENBLAS_CORETYPE:-} ]] &&
  [[ $(grep -m1 '^flags' /proc/cpuinfo | grep -ow 'avx512f\|avx512bw\|avx512dq\|avx512vl' |
    sort -u | wc -l) == 4 ]]; then
  export OPENBLAS_CORETYPE=SkylakeX
fi
