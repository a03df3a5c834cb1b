// RUN: dlc-opt %s -p lower-tensor-to-loop --split-input-file --verify-diagnostics -o %t

// Every `pack` the code generator cannot carry out is a located diagnostic.

tensor.func @mm(%a: !graph.tensor<7x5xf32>, %b: !graph.tensor<5x9xf32>) -> !graph.tensor<7x9xf32> {
    // expected-error @+1 {{not supported by the code generator yet: pack [0, 1]: one operand at a time}}
    %c = tensor.compute(%a, %b) reduce [5] by "add" init 0.0 : f32 schedule #schedule.nest<tile [d0 = [4], d1 = [4]], interchange [d0.0, d1.0, r0, d0.1, d1.1], unroll [d0.1, d1.1], vectorize d1.1 x 4, pack [0, 1]> {
    ^bb0(%i: i64, %j: i64, %k: i64):
      %x = tensor.read %a[%i, %k] : !graph.tensor<7x5xf32>
      %y = tensor.read %b[%k, %j] : !graph.tensor<5x9xf32>
      %p = arith.mulf %x, %y : f32
      tensor.yield %p : f32
    } : (!graph.tensor<7x5xf32>, !graph.tensor<5x9xf32>) -> !graph.tensor<7x9xf32>
    tensor.return %c : !graph.tensor<7x9xf32>
}

// -----

tensor.func @mm(%a: !graph.tensor<7x5xf32>, %b: !graph.tensor<5x9xf32>) -> !graph.tensor<7x9xf32> {
    // expected-error @+1 {{not supported by the code generator yet: pack [2]: the compute has 2 inputs}}
    %c = tensor.compute(%a, %b) reduce [5] by "add" init 0.0 : f32 schedule #schedule.nest<tile [d0 = [4], d1 = [4]], interchange [d0.0, d1.0, r0, d0.1, d1.1], unroll [d0.1, d1.1], vectorize d1.1 x 4, pack [2]> {
    ^bb0(%i: i64, %j: i64, %k: i64):
      %x = tensor.read %a[%i, %k] : !graph.tensor<7x5xf32>
      %y = tensor.read %b[%k, %j] : !graph.tensor<5x9xf32>
      %p = arith.mulf %x, %y : f32
      tensor.yield %p : f32
    } : (!graph.tensor<7x5xf32>, !graph.tensor<5x9xf32>) -> !graph.tensor<7x9xf32>
    tensor.return %c : !graph.tensor<7x9xf32>
}

// -----

tensor.func @mm(%a: !graph.tensor<7x5xf32>, %b: !graph.tensor<5x9xf32>) -> !graph.tensor<7x9xf32> {
    // expected-error @+1 {{not supported by the code generator yet: pack [1]: input 1 must be read once by the body}}
    %c = tensor.compute(%a, %b) reduce [5] by "add" init 0.0 : f32 schedule #schedule.nest<tile [d0 = [4], d1 = [4]], interchange [d0.0, d1.0, r0, d0.1, d1.1], unroll [d0.1, d1.1], vectorize d1.1 x 4, pack [1]> {
    ^bb0(%i: i64, %j: i64, %k: i64):
      %x = tensor.read %a[%i, %k] : !graph.tensor<7x5xf32>
      %y = tensor.read %b[%k, %j] : !graph.tensor<5x9xf32>
      %z = tensor.read %b[%k, %j] : !graph.tensor<5x9xf32>
      %p = arith.mulf %x, %y : f32
      %q = arith.mulf %p, %z : f32
      tensor.yield %q : f32
    } : (!graph.tensor<7x5xf32>, !graph.tensor<5x9xf32>) -> !graph.tensor<7x9xf32>
    tensor.return %c : !graph.tensor<7x9xf32>
}

// -----

tensor.func @mm(%a: !graph.tensor<7x5xf32>, %b: !graph.tensor<5x9xf32>) -> !graph.tensor<7x9xf32> {
    // expected-error @+1 {{not supported by the code generator yet: pack [0]: the packed operand varies along the rows (d0); pack the one along d1 and r0}}
    %c = tensor.compute(%a, %b) reduce [5] by "add" init 0.0 : f32 schedule #schedule.nest<tile [d0 = [4], d1 = [4]], interchange [d0.0, d1.0, r0, d0.1, d1.1], unroll [d0.1, d1.1], pack [0]> {
    ^bb0(%i: i64, %j: i64, %k: i64):
      %x = tensor.read %a[%i, %k] : !graph.tensor<7x5xf32>
      %y = tensor.read %b[%k, %j] : !graph.tensor<5x9xf32>
      %p = arith.mulf %x, %y : f32
      tensor.yield %p : f32
    } : (!graph.tensor<7x5xf32>, !graph.tensor<5x9xf32>) -> !graph.tensor<7x9xf32>
    tensor.return %c : !graph.tensor<7x9xf32>
}

// -----

tensor.func @mm(%a: !graph.tensor<7x5xf32>, %b: !graph.tensor<5x9xf32>) -> !graph.tensor<7x9xf32> {
    // expected-error @+1 {{not supported by the code generator yet: pack [1]: the packed operand must vary along the columns (d1) and the reduction (r0)}}
    %c = tensor.compute(%a, %b) reduce [5] by "add" init 0.0 : f32 schedule #schedule.nest<tile [d0 = [4], d1 = [4]], interchange [d0.0, d1.0, r0, d0.1, d1.1], unroll [d0.1, d1.1], vectorize d1.1 x 4, pack [1]> {
    ^bb0(%i: i64, %j: i64, %k: i64):
      %x = tensor.read %a[%i, %k] : !graph.tensor<7x5xf32>
      %y = tensor.read %b[%k, %k] : !graph.tensor<5x9xf32>
      %p = arith.mulf %x, %y : f32
      tensor.yield %p : f32
    } : (!graph.tensor<7x5xf32>, !graph.tensor<5x9xf32>) -> !graph.tensor<7x9xf32>
    tensor.return %c : !graph.tensor<7x9xf32>
}

// -----

tensor.func @mm(%a: !graph.tensor<7x5xf32>, %b: !graph.tensor<5x9xf32>) -> !graph.tensor<7x9xf32> {
    // expected-error @+1 {{not supported by the code generator yet: pack [1]: the packed read's indices read a tensor}}
    %c = tensor.compute(%a, %b) reduce [5] by "add" init 0.0 : f32 schedule #schedule.nest<tile [d0 = [4], d1 = [4]], interchange [d0.0, d1.0, r0, d0.1, d1.1], unroll [d0.1, d1.1], pack [1]> {
    ^bb0(%i: i64, %j: i64, %k: i64):
      %x = tensor.read %a[%i, %k] : !graph.tensor<7x5xf32>
      %f = arith.fptosi %x : f32 to i64
      %y = tensor.read %b[%f, %j] : !graph.tensor<5x9xf32>
      %p = arith.mulf %x, %y : f32
      tensor.yield %p : f32
    } : (!graph.tensor<7x5xf32>, !graph.tensor<5x9xf32>) -> !graph.tensor<7x9xf32>
    tensor.return %c : !graph.tensor<7x9xf32>
}

// -----

tensor.func @mm(%a: !graph.tensor<7x5xf32>, %b: !graph.tensor<5x9xf32>) -> !graph.tensor<7x9xf32> {
    // expected-error @+1 {{not supported by the code generator yet: pack [1]: the columns' innermost loop must be in the unrolled register tile}}
    %c = tensor.compute(%a, %b) reduce [5] by "add" init 0.0 : f32 schedule #schedule.nest<pack [1]> {
    ^bb0(%i: i64, %j: i64, %k: i64):
      %x = tensor.read %a[%i, %k] : !graph.tensor<7x5xf32>
      %y = tensor.read %b[%k, %j] : !graph.tensor<5x9xf32>
      %p = arith.mulf %x, %y : f32
      tensor.yield %p : f32
    } : (!graph.tensor<7x5xf32>, !graph.tensor<5x9xf32>) -> !graph.tensor<7x9xf32>
    tensor.return %c : !graph.tensor<7x9xf32>
}

// -----

tensor.func @mm(%a: !graph.tensor<7x5xf32>, %b: !graph.tensor<5x9xf32>) -> !graph.tensor<7x9xf32> {
    // expected-error @+1 {{not supported by the code generator yet: pack [1]: a loop over the rows must lie outside the reduction loops}}
    %c = tensor.compute(%a, %b) reduce [5] by "add" init 0.0 : f32 schedule #schedule.nest<tile [d1 = [4]], interchange [d1.0, r0, d0, d1.1], unroll [d0, d1.1], pack [1]> {
    ^bb0(%i: i64, %j: i64, %k: i64):
      %x = tensor.read %a[%i, %k] : !graph.tensor<7x5xf32>
      %y = tensor.read %b[%k, %j] : !graph.tensor<5x9xf32>
      %p = arith.mulf %x, %y : f32
      tensor.yield %p : f32
    } : (!graph.tensor<7x5xf32>, !graph.tensor<5x9xf32>) -> !graph.tensor<7x9xf32>
    tensor.return %c : !graph.tensor<7x9xf32>
}

// -----

tensor.func @mm(%a: !graph.tensor<7x5xf32>, %b: !graph.tensor<5x9xf32>) -> !graph.tensor<7x9xf32> {
    // expected-error @+1 {{not supported by the code generator yet: pack [1]: not inside a fusion group}}
    %c = tensor.compute(%a, %b) reduce [5] by "add" init 0.0 : f32 schedule #schedule.nest<interchange [d0, r0, d1], pack [1], group 1 at 1> {
    ^bb0(%i: i64, %j: i64, %k: i64):
      %x = tensor.read %a[%i, %k] : !graph.tensor<7x5xf32>
      %y = tensor.read %b[%k, %j] : !graph.tensor<5x9xf32>
      %p = arith.mulf %x, %y : f32
      tensor.yield %p : f32
    } : (!graph.tensor<7x5xf32>, !graph.tensor<5x9xf32>) -> !graph.tensor<7x9xf32>
    tensor.return %c : !graph.tensor<7x9xf32>
}
