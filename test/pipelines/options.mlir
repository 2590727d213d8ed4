// The compile options are defined once (passes/lib/CompileOptions.def):
// `llmc-opt --llmc-train-pipeline` and `llmc compile` take the same names,
// reject the same values with the same message, and compile the same thing.
// RUN: llmc-opt %S/../passes/Inputs/tiny-gpt.mlir --llmc-train-pipeline="adam-eps=1e-6 beta2=0.99 no-decay=none grad-bucket-mb=0 emit=train" | FileCheck %s --check-prefix=OPT
// RUN: llmc-opt %S/../passes/Inputs/tiny-gpt.mlir --llmc-train-pipeline="adam-eps=1e-6 beta2=0.99 no-decay=none grad-bucket-mb=0 emit=train" > %t.opt.mlir
// RUN: llmc compile %S/../passes/Inputs/tiny-gpt.mlir --adam-eps 1e-6 --beta2 0.99 --no-decay none --grad-bucket-mb 0 --emit train -o %t.driver.mlir
// RUN: diff %t.opt.mlir %t.driver.mlir
// RUN: not llmc-opt %S/../passes/Inputs/tiny-gpt.mlir --llmc-train-pipeline="precision=f16" 2>&1 | FileCheck %s --check-prefix=F16
// RUN: not llmc compile %S/../passes/Inputs/tiny-gpt.mlir --precision f16 -o %t.x 2>&1 | FileCheck %s --check-prefix=F16
// RUN: not llmc-opt %S/../passes/Inputs/tiny-gpt.mlir --llmc-train-pipeline="qlora=true" 2>&1 | FileCheck %s --check-prefix=QLORA
// RUN: not llmc-opt %S/../passes/Inputs/tiny-gpt.mlir --llmc-train-pipeline="memory-budget=lots" 2>&1 | FileCheck %s --check-prefix=BUDGET
// RUN: not llmc-opt %S/../passes/Inputs/tiny-gpt.mlir --llmc-train-pipeline="zero=4" 2>&1 | FileCheck %s --check-prefix=ZERO
// RUN: not llmc-opt %S/../passes/Inputs/tiny-gpt.mlir --llmc-train-pipeline="grad-bucket-mb=-1" 2>&1 | FileCheck %s --check-prefix=BUCKET
// RUN: not llmc-opt %S/../passes/Inputs/tiny-gpt.mlir --llmc-train-pipeline="recompute=budget=1MiB" 2>&1 | FileCheck %s --check-prefix=RECOMPUTE-BUDGET
// RUN: not llmc compile %S/../passes/Inputs/tiny-gpt.mlir --lr-schedule wavy -o %t.x 2>&1 | FileCheck %s --check-prefix=SCHEDULE
// RUN: llmc compile %S/../passes/Inputs/tiny-gpt.mlir --schedule linear -o %t.old 2>&1 | FileCheck %s --check-prefix=OLD-SCHEDULE
// RUN: llmc inspect %t.old | FileCheck %s --check-prefix=OLD-SCHEDULE-KEPT
// RUN: not llmc compile %S/../passes/Inputs/tiny-gpt.mlir --schedule linear --lr-schedule constant -o %t.x 2>&1 | FileCheck %s --check-prefix=BOTH-SCHEDULES

// The AdamW hyperparameters reach the optimizer through llmc-opt too.
// OPT: llm.multi_tensor_adamw
// OPT-SAME: beta2 = 0.98999999999999999
// OPT-SAME: epsilon = 9.9999999999999995E-7

// F16: error: {{(llmc-train-pipeline: )?}}unknown --precision 'f16' (expected fp32, bf16, fp16 or fp8)
// QLORA: error: llmc-train-pipeline: --qlora needs --lora
// BUDGET: error: llmc-train-pipeline: bad --memory-budget 'lots' (expected a size such as 24GiB, 512MiB or 1e9)
// ZERO: error: llmc-train-pipeline: unknown --zero '4' (expected 0, 1, 2 or 3)
// BUCKET: error: llmc-train-pipeline: --grad-bucket-mb must be >= 0
// RECOMPUTE-BUDGET: error: llmc-train-pipeline: recompute=budget chooses layers by compiling many times; use `llmc compile`
// SCHEDULE: llmc compile: error: unknown --lr-schedule 'wavy' (expected cosine, linear or constant)
// OLD-SCHEDULE: llmc compile: note: --schedule is now spelled --lr-schedule
// OLD-SCHEDULE-KEPT: linear
// BOTH-SCHEDULES: llmc compile: error: --schedule is the old spelling of --lr-schedule; give one
