// RUN: llmc-opt %S/Inputs/tiny-gpt.mlir --llmc-train-pipeline="memory-budget=100000" | FileCheck %s --check-prefix=FITS
// RUN: not llmc-opt %S/Inputs/tiny-gpt.mlir --llmc-train-pipeline="memory-budget=4000" 2>&1 | FileCheck %s
// RUN: llmc model gpt2 --preset tiny --set n_layer=2 -o %t.mlir
// RUN: not llmc-opt %t.mlir --llmc-train-pipeline="mesh=pp=2 microbatches=2 memory-budget=20000000" 2>&1 | FileCheck %s --check-prefix=STAGE
// RUN: not llmc-opt %S/Inputs/tiny-gpt.mlir --llmc-train-pipeline --llmc-memory-budget="bytes=-5" 2>&1 | FileCheck %s --check-prefix=NEGATIVE

// FITS: exec.program @train_step

// The error gives the size, the overshoot, the largest parts and what
// shrinks the two largest.
// CHECK: error: memory budget: each rank needs 5.2 KiB, 1.3 KiB over the 3.9 KiB budget; largest: optimizer state 1.6 KiB, activations 1.0 KiB, parameters 832 B. To shrink optimizer state: --zero 1 (shards it over dp), --offload optimizer (keeps it in host memory), more pp or tp; activations: --recompute selective|full|budget=<bytes>, --offload activations (keeps them in host memory), --precision bf16, fewer rows per microbatch (a smaller batch_size with more --microbatches), more pipeline stages (pp) or tensor parallelism (tp, --sp)

// A pipeline names the stage that does not fit.
// STAGE: error: memory budget: pipeline stage {{[01]}} (ranks {{[01]}}) needs {{[0-9.]+}} MiB, {{.*}} over the 19.1 MiB budget

// NEGATIVE: error: memory budget must be >= 0 bytes, got -5
