#!/usr/bin/env python3
"""What a GPU machine has, as one JSON object (scripts/gpu-check.sh's
preflight step; bench/gpu_results.py keeps it as the lease's "device"):
the GPU and its driver, the CUDA runtime PyTorch was built for and the
toolkit's nvcc, the cuDNN PyTorch loads and the one llmc would load (the
toolkit's, else PyTorch's wheel), NVRTC, PyTorch's version, and which
backend PyTorch's scaled_dot_product_attention picks for a causal bf16
attention of GPT-2's shape (read off the kernel names it launches).

Usage: gpu_preflight.py   (run with the python3 that has PyTorch)
"""
import ctypes
import glob
import json
import os
import subprocess
import sys


def command_output(argv):
    try:
        return subprocess.run(argv, capture_output=True, text=True, timeout=60).stdout.strip()
    except (OSError, subprocess.TimeoutExpired):
        return ""


def library_version(patterns, symbol, decode):
    """Loads the first library a glob pattern matches and calls its version function."""
    for pattern in patterns:
        for path in sorted(glob.glob(pattern)):
            try:
                lib = ctypes.CDLL(path)
                return decode(lib, getattr(lib, symbol)), path
            except (OSError, AttributeError):
                continue
    return None, None


def cudnn_version(lib, fn):
    fn.restype = ctypes.c_size_t
    v = fn()
    return f"{v // 10000}.{v % 10000 // 100}.{v % 100}"


def nvrtc_version(lib, fn):
    major, minor = ctypes.c_int(), ctypes.c_int()
    fn(ctypes.byref(major), ctypes.byref(minor))
    return f"{major.value}.{minor.value}"


def sdpa_backend(torch):
    """The backend of PyTorch's SDPA for B=4, H=12, T=1024, D=64, causal, bf16."""
    import torch.nn.functional as F
    q, k, v = (torch.randn(4, 12, 1024, 64, device="cuda", dtype=torch.bfloat16, requires_grad=True)
               for _ in range(3))
    F.scaled_dot_product_attention(q, k, v, is_causal=True).sum().backward()
    torch.cuda.synchronize()
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        F.scaled_dot_product_attention(q, k, v, is_causal=True).sum().backward()
        torch.cuda.synchronize()
    names = " ".join(e.key.lower() for e in prof.key_averages())
    for key, backend in (("cudnn", "cudnn"), ("flash", "flash"), ("fmha", "efficient"),
                         ("efficient", "efficient")):
        if key in names:
            return backend
    return "math"


def main():
    facts = {}
    smi = command_output(["nvidia-smi", "--query-gpu=name,driver_version,memory.total",
                          "--format=csv,noheader"]).splitlines()
    if smi:
        name, driver, memory = (x.strip() for x in smi[0].split(","))
        facts.update(name=name, driver=driver, memory=memory, gpus=len(smi))
    nvcc = command_output(["nvcc", "--version"]).splitlines()
    if nvcc:
        facts["nvcc"] = nvcc[-1]
    toolkit = os.environ.get("CUDA_HOME", "/usr/local/cuda")
    facts["cudnn_toolkit"], facts["cudnn_toolkit_path"] = library_version(
        [f"{toolkit}/lib*/libcudnn.so.9*", f"{toolkit}/targets/*/lib/libcudnn.so.9*"],
        "cudnnGetVersion", cudnn_version)
    facts["nvrtc"], _ = library_version(
        [f"{toolkit}/lib*/libnvrtc.so*", f"{toolkit}/targets/*/lib/libnvrtc.so*"],
        "nvrtcVersion", nvrtc_version)
    try:
        import torch
    except ImportError:
        facts["torch"] = None
        print(json.dumps(facts, sort_keys=True))
        return
    facts["torch"] = torch.__version__
    facts["cuda"] = torch.version.cuda
    if torch.backends.cudnn.is_available():
        v = torch.backends.cudnn.version()
        facts["cudnn"] = f"{v // 10000}.{v % 10000 // 100}.{v % 100}"
    wheel = glob.glob(os.path.join(os.path.dirname(torch.__file__), "..", "nvidia", "cudnn", "lib",
                                   "libcudnn.so.9"))
    if wheel:
        facts["cudnn_wheel_path"] = os.path.realpath(wheel[0])
    if torch.cuda.is_available():
        facts["sm"] = "%d.%d" % torch.cuda.get_device_capability()
        facts["sdpa_backend"] = sdpa_backend(torch)
    print(json.dumps(facts, sort_keys=True))


if __name__ == "__main__":
    sys.exit(main())
