// RUN: dlc-opt %s -f mlir --split-input-file --verify-diagnostics

// A lane mask must have the operands' lane count.
llvm.func @wrong_lanes(%m: vector<8xi1>, %a: vector<4xf32>) -> vector<4xf32> {
  // expected-error@+1 {{llvm.select: mask vector<8xi1> does not fit the operands' type vector<4xf32>}}
  %r = llvm.select %m, %a, %a : vector<8xi1>, vector<4xf32>
  llvm.return %r : vector<4xf32>
}

// -----

// Compares take floats or float vectors.
llvm.func @int_vectors(%a: vector<4xi32>) -> vector<4xi1> {
  // expected-error@+1 {{llvm.fcmp: operands must be two floats or float vectors of one type, not vector<4xi32> and vector<4xi32>}}
  %m = llvm.fcmp "olt" %a, %a : vector<4xi32>
  llvm.return %m : vector<4xi1>
}
