# lit configuration for llmc: dialect and pass tests (FileCheck,
# -verify-diagnostics) and end-to-end tool tests.
import os
import lit.formats

config.name = "llmc"
config.test_format = lit.formats.ShTest(execute_external=False)
config.suffixes = [".mlir", ".test"]
config.test_source_root = os.path.join(config.llmc_src_root, "test")
config.test_exec_root = os.path.join(config.llmc_obj_root, "test")
config.excludes = ["unit", "Inputs", "CMakeLists.txt", "lit.cfg.py", "lit.site.cfg.py.in"]

tools = config.llmc_tools_dir
# FileCheck and not come from LLVM 22's tool directory.
llvm_tools = os.path.dirname(config.filecheck)
config.environment["PATH"] = os.pathsep.join([tools, llvm_tools, config.environment.get("PATH", "")])
# OPENBLAS_CORETYPE passes through so the suite can be run on each sgemm
# kernel OpenBLAS may pick (docs/testing.md, "Bit-exact claims").
for var in ("HOME", "TMPDIR", "OPENBLAS_CORETYPE"):
    if var in os.environ:
        config.environment[var] = os.environ[var]
config.environment["OMPI_ALLOW_RUN_AS_ROOT"] = "1"
config.environment["OMPI_ALLOW_RUN_AS_ROOT_CONFIRM"] = "1"
config.environment["OMPI_MCA_rmaps_base_oversubscribe"] = "1"
# More ranks than cores: idle ranks yield instead of busy-polling.
config.environment["OMPI_MCA_mpi_yield_when_idle"] = "1"
config.environment["OMP_WAIT_POLICY"] = "PASSIVE"

config.substitutions.append(("%llmc_lib", os.path.join(config.llmc_obj_root, "lib")))
config.substitutions.append(("%llmc_bin", tools))
config.substitutions.append(("%llmc-opt", os.path.join(tools, "llmc-opt")))
config.substitutions.append(("%llmc-run", os.path.join(tools, "llmc-run")))
config.substitutions.append(("%llmc", os.path.join(tools, "llmc")))
config.substitutions.append(("%FileCheck", config.filecheck))
config.substitutions.append(("%not", config.not_tool))
# Each test's mpirun keeps its session directory under the test's own %t:
# lit gives every test one shared TMPDIR, and two mpiruns starting there at
# once can both try to create Open MPI's per-host session directory, the
# second failing with "File exists".
config.substitutions.append(
    ("%mpirun", config.mpirun + " --bind-to none --mca orte_tmpdir_base %t.ompi"))
config.substitutions.append(("%torch-python", config.torch_python))
config.substitutions.append(("%torchrun", config.torchrun))
config.substitutions.append(("%src", config.llmc_src_root))
config.substitutions.append(("%objroot", config.llmc_obj_root))
config.substitutions.append(("%python", config.torch_python or "python3"))

if config.cuda_enabled:
    config.available_features.add("cuda")
# cuDNN attention compiled in (cudnn-frontend's headers were found).
if config.cudnn_attention:
    config.available_features.add("cudnn-attention")
if config.mpirun:
    config.available_features.add("mpi")
if config.torchrun and not config.torchrun.endswith("-NOTFOUND"):
    config.available_features.add("torchrun")
# A usable NVIDIA GPU: the tests that train on it run; the ones that check
# the no-GPU error do not.
if config.cuda_enabled:
    import subprocess
    try:
        probe = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, timeout=30)
        if probe.returncode == 0 and "GPU" in probe.stdout:
            config.available_features.add("gpu")
    except (OSError, subprocess.SubprocessError):
        pass
