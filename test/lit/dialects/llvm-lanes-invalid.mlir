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

// -----

// A compare of vectors gives a vector of i1.
llvm.func @scalar_result(%a: vector<4xf32>) -> i1 {
  // expected-error@+1 {{llvm.fcmp: result i1 does not fit operands vector<4xf32>}}
  %m = "llvm.fcmp"(%a, %a) <{predicate = 4 : i64}> : (vector<4xf32>, vector<4xf32>) -> i1
  llvm.return %m : i1
}

// -----

llvm.func @bad_predicate(%a: f32) -> i1 {
  // expected-error@+1 {{llvm.fcmp: predicate 20 out of range}}
  %m = "llvm.fcmp"(%a, %a) <{predicate = 20 : i64}> : (f32, f32) -> i1
  llvm.return %m : i1
}

// -----

llvm.func @mixed_select(%c: i1, %a: f32, %b: f64) -> f32 {
  // expected-error@+1 {{llvm.select: operands f32, f64 and result f32 must have one type}}
  %r = "llvm.select"(%c, %a, %b) : (i1, f32, f64) -> f32
  llvm.return %r : f32
}
