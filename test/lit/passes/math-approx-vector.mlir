// RUN: dlc-opt %s -p math-approx | filecheck %s

// On vectors (a register tile's epilogue) exp, tanh and erf expand to the scalar
// code on whole vectors: constants broadcast, compares and selects as lane masks.
// CHECK-LABEL: loop.func @erf_tanh_vector(
// CHECK-NOT:     math.erf
// CHECK:         math.fma %{{.*}} : vector<8xf32>
// CHECK:         %[[M:.*]] = loop.vcmpf olt, %{{.*}} : vector<8xf32>
// CHECK:         %[[R:.*]] = loop.vselect %[[M]], %{{.*}} : vector<8xf32>
// CHECK-NEXT:    %[[E:.*]] = math.copysign %[[R]], %{{.*}} : vector<8xf32>
// CHECK-NOT:     math.tanh
// CHECK:         loop.vselect
// CHECK-NEXT:    %[[T:.*]] = math.copysign %{{.*}}, %[[E]] : vector<8xf32>
// CHECK-NEXT:    loop.vstore %[[T]]
builtin.module {
  loop.func @erf_tanh_vector(%x: memref<8xf32>) {
    %c0 = arith.constant 0 : i64
    %v = loop.vload %x[%c0] : memref<8xf32> -> vector<8xf32>
    %e = math.erf %v : vector<8xf32>
    %t = math.tanh %e : vector<8xf32>
    loop.vstore %t, %x[%c0] : vector<8xf32>, memref<8xf32>
    loop.return
  }

// Negative cases: log on vectors (its expansion needs integer-to-float casts on
// vectors) and f64 vectors keep the math ops.
// CHECK-LABEL: loop.func @log_and_f64_vectors(
// CHECK:         math.log %{{.*}} : vector<8xf32>
// CHECK:         math.erf %{{.*}} : vector<4xf64>
// CHECK:         loop.return
  loop.func @log_and_f64_vectors(%x: memref<8xf32>, %y: memref<4xf64>) {
    %c0 = arith.constant 0 : i64
    %v = loop.vload %x[%c0] : memref<8xf32> -> vector<8xf32>
    %l = math.log %v : vector<8xf32>
    loop.vstore %l, %x[%c0] : vector<8xf32>, memref<8xf32>
    %w = loop.vload %y[%c0] : memref<4xf64> -> vector<4xf64>
    %e = math.erf %w : vector<4xf64>
    loop.vstore %e, %y[%c0] : vector<4xf64>, memref<4xf64>
    loop.return
  }
}
