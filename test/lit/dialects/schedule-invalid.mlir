// RUN: dlc-opt %s --split-input-file --verify-diagnostics | filecheck %s

// Every invalid schedule is a located verifier error, never a wrong result.

// CHECK: schedule-invalid.mlir:[[# @LINE + 2]]:5: error: IR does not verify in the input: tensor.compute: schedule: interchange: the loops of d0 must keep their level order
tensor.func @f(%x: !graph.tensor<8xf32>) -> !graph.tensor<8xf32> {
    %e = tensor.compute(%x) schedule #schedule.nest<tile [d0 = [4]], interchange [d0.1, d0.0]> {
    ^bb0(%i: i64):
      %v = tensor.read %x[%i] : !graph.tensor<8xf32>
      tensor.yield %v : f32
    } : (!graph.tensor<8xf32>) -> !graph.tensor<8xf32>
    tensor.return %e : !graph.tensor<8xf32>
}

// -----

// CHECK: error: IR does not verify in the input: tensor.compute: schedule: tile: no axis r0 (the compute has d0)
tensor.func @f(%x: !graph.tensor<8xf32>) -> !graph.tensor<8xf32> {
    %e = tensor.compute(%x) schedule #schedule.nest<tile [r0 = [4]]> {
    ^bb0(%i: i64):
      %v = tensor.read %x[%i] : !graph.tensor<8xf32>
      tensor.yield %v : f32
    } : (!graph.tensor<8xf32>) -> !graph.tensor<8xf32>
    tensor.return %e : !graph.tensor<8xf32>
}

// -----

// CHECK: error: IR does not verify in the input: tensor.compute: schedule: tile: each size of d0 must divide the one before it
tensor.func @f(%x: !graph.tensor<8xf32>) -> !graph.tensor<8xf32> {
    %e = tensor.compute(%x) schedule #schedule.nest<tile [d0 = [4, 3]]> {
    ^bb0(%i: i64):
      %v = tensor.read %x[%i] : !graph.tensor<8xf32>
      tensor.yield %v : f32
    } : (!graph.tensor<8xf32>) -> !graph.tensor<8xf32>
    tensor.return %e : !graph.tensor<8xf32>
}

// -----

// CHECK: error: IR does not verify in the input: tensor.compute: schedule: interchange: expected a permutation of [d0, r0]
tensor.func @f(%x: !graph.tensor<2x8xf32>) -> !graph.tensor<2xf32> {
    %s = tensor.compute(%x) reduce [8] by "add" init 0.0 : f32 schedule #schedule.nest<interchange [d0]> {
    ^bb0(%i: i64, %k: i64):
      %v = tensor.read %x[%i, %k] : !graph.tensor<2x8xf32>
      tensor.yield %v : f32
    } : (!graph.tensor<2x8xf32>) -> !graph.tensor<2xf32>
    tensor.return %s : !graph.tensor<2xf32>
}

// -----

// CHECK: error: IR does not verify in the input: tensor.compute: schedule: interchange: reduction loops must keep their order (it fixes the fold order)
tensor.func @f(%x: !graph.tensor<4x8xf32>) -> !graph.tensor<f32> {
    %s = tensor.compute(%x) reduce [4, 8] by "add" init 0.0 : f32 schedule #schedule.nest<interchange [r1, r0]> {
    ^bb0(%k: i64, %l: i64):
      %v = tensor.read %x[%k, %l] : !graph.tensor<4x8xf32>
      tensor.yield %v : f32
    } : (!graph.tensor<4x8xf32>) -> !graph.tensor<f32>
    tensor.return %s : !graph.tensor<f32>
}

// -----

// CHECK: error: IR does not verify in the input: tensor.compute: schedule: parallel: r0 is a reduction loop
tensor.func @f(%x: !graph.tensor<2x8xf32>) -> !graph.tensor<2xf32> {
    %s = tensor.compute(%x) reduce [8] by "add" init 0.0 : f32 schedule #schedule.nest<parallel [d0, r0]> {
    ^bb0(%i: i64, %k: i64):
      %v = tensor.read %x[%i, %k] : !graph.tensor<2x8xf32>
      tensor.yield %v : f32
    } : (!graph.tensor<2x8xf32>) -> !graph.tensor<2xf32>
    tensor.return %s : !graph.tensor<2xf32>
}

// -----

// CHECK: error: IR does not verify in the input: tensor.compute: schedule: unroll: no loop d1
tensor.func @f(%x: !graph.tensor<8xf32>) -> !graph.tensor<8xf32> {
    %e = tensor.compute(%x) schedule #schedule.nest<unroll [d1]> {
    ^bb0(%i: i64):
      %v = tensor.read %x[%i] : !graph.tensor<8xf32>
      tensor.yield %v : f32
    } : (!graph.tensor<8xf32>) -> !graph.tensor<8xf32>
    tensor.return %e : !graph.tensor<8xf32>
}

// -----

// A group member reading another point of the shared loops would read a value not
// computed yet.
// CHECK: schedule-invalid.mlir:[[# @LINE + 8]]:5: error: IR does not verify in the input: tensor.compute: schedule: group 0: a member reads another point of the shared loops
tensor.func @f(%x: !graph.tensor<8xf32>) -> !graph.tensor<8xf32> {
    %e = tensor.compute(%x) schedule #schedule.nest<group 0 at 1> {
    ^bb0(%i: i64):
      %v = tensor.read %x[%i] : !graph.tensor<8xf32>
      %r = math.exp %v : f32
      tensor.yield %r : f32
    } : (!graph.tensor<8xf32>) -> !graph.tensor<8xf32>
    %f = tensor.compute(%e) schedule #schedule.nest<group 0 at 1> {
    ^bb0(%i: i64):
      %c7 = arith.constant 7 : i64
      %j = arith.subi %c7, %i : i64
      %v = tensor.read %e[%j] : !graph.tensor<8xf32>
      tensor.yield %v : f32
    } : (!graph.tensor<8xf32>) -> !graph.tensor<8xf32>
    tensor.return %f : !graph.tensor<8xf32>
}

// -----

// CHECK: error: IR does not verify in the input: tensor.compute: schedule: group 0: an internal member must be used only by later members
tensor.func @f(%x: !graph.tensor<8xf32>) -> (!graph.tensor<8xf32>, !graph.tensor<8xf32>) {
    %e = tensor.compute(%x) schedule #schedule.nest<group 0 at 1 internal> {
    ^bb0(%i: i64):
      %v = tensor.read %x[%i] : !graph.tensor<8xf32>
      tensor.yield %v : f32
    } : (!graph.tensor<8xf32>) -> !graph.tensor<8xf32>
    %f = tensor.compute(%e) schedule #schedule.nest<group 0 at 1> {
    ^bb0(%i: i64):
      %v = tensor.read %e[%i] : !graph.tensor<8xf32>
      tensor.yield %v : f32
    } : (!graph.tensor<8xf32>) -> !graph.tensor<8xf32>
    tensor.return %e, %f : !graph.tensor<8xf32>, !graph.tensor<8xf32>
}

// -----

// CHECK: schedule-invalid.mlir:[[# @LINE + 2]]:53: error: Expected one of 'epilogue', 'fma', 'group', 'interchange', 'pack', 'parallel', 'split', 'tile', 'unroll', 'vectorize' in a schedule
tensor.func @f(%x: !graph.tensor<8xf32>) -> !graph.tensor<8xf32> {
    %e = tensor.compute(%x) schedule #schedule.nest<fuse [d0]> {
    ^bb0(%i: i64):
      %v = tensor.read %x[%i] : !graph.tensor<8xf32>
      tensor.yield %v : f32
    } : (!graph.tensor<8xf32>) -> !graph.tensor<8xf32>
    tensor.return %e : !graph.tensor<8xf32>
}

// -----

// CHECK: error: IR does not verify in the input: tensor.compute: schedule: split: the points of d0 must increase within (0, 8)
tensor.func @f(%x: !graph.tensor<8xf32>) -> !graph.tensor<8xf32> {
    %e = tensor.compute(%x) schedule #schedule.nest<split [d0 = [5, 2]]> {
    ^bb0(%i: i64):
      %v = tensor.read %x[%i] : !graph.tensor<8xf32>
      tensor.yield %v : f32
    } : (!graph.tensor<8xf32>) -> !graph.tensor<8xf32>
    tensor.return %e : !graph.tensor<8xf32>
}

// -----

// CHECK: error: IR does not verify in the input: tensor.compute: schedule: split: d0 is unrolled, vectorized or parallel, or in a group
tensor.func @f(%x: !graph.tensor<8xf32>) -> !graph.tensor<8xf32> {
    %e = tensor.compute(%x) schedule #schedule.nest<parallel [d0], split [d0 = [2]]> {
    ^bb0(%i: i64):
      %v = tensor.read %x[%i] : !graph.tensor<8xf32>
      tensor.yield %v : f32
    } : (!graph.tensor<8xf32>) -> !graph.tensor<8xf32>
    tensor.return %e : !graph.tensor<8xf32>
}

// -----

// CHECK: error: IR does not verify in the input: tensor.compute: schedule: split: no untiled output loop d0
tensor.func @f(%x: !graph.tensor<8xf32>) -> !graph.tensor<8xf32> {
    %e = tensor.compute(%x) schedule #schedule.nest<tile [d0 = [4]], split [d0 = [2]]> {
    ^bb0(%i: i64):
      %v = tensor.read %x[%i] : !graph.tensor<8xf32>
      tensor.yield %v : f32
    } : (!graph.tensor<8xf32>) -> !graph.tensor<8xf32>
    tensor.return %e : !graph.tensor<8xf32>
}
