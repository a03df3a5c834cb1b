// RUN: dlc-opt %s -t llvm --split-input-file --verify-diagnostics | filecheck %s

// LLVM IR translation takes llvm-dialect ops only; anything else in MLIR input at the
// llvm level is a located error (it was xDSL's NotImplementedError, an internal error).

// CHECK: llvm-target-unsupported.mlir:[[# @LINE + 2]]:3: error: not supported by the code generator yet: builtin.module
builtin.module {
  builtin.module {
  }
}

// -----

// CHECK: llvm-target-unsupported.mlir:[[# @LINE + 3]]:5: error: not supported by the code generator yet: arith.addi
builtin.module {
  llvm.func @f(%a: i64) -> i64 {
    %b = arith.addi %a, %a : i64
    llvm.return %b : i64
  }
}
