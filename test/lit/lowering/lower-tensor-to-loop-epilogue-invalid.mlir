// RUN: dlc-opt %s -p lower-tensor-to-loop --split-input-file --verify-diagnostics -o %t

// Every `epilogue` the code generator cannot carry out is a located diagnostic.

tensor.func @mm(%a: !graph.tensor<7x5xf32>, %b: !graph.tensor<5x8xf32>) -> !graph.tensor<7x8xf32> {
    // expected-error @+1 {{schedule: epilogue 2: op 2 after it is tensor.return, not a tensor.compute}}
    %c = tensor.compute(%a, %b) reduce [5] by "add" init 0.0 : f32 schedule #schedule.nest<tile [d0 = [4], d1 = [8]], interchange [d0.0, d1.0, r0, d0.1, d1.1], unroll [d0.1, d1.1], vectorize d1.1 x 4, epilogue 2> {
    ^bb0(%i: i64, %j: i64, %k: i64):
      %x = tensor.read %a[%i, %k] : !graph.tensor<7x5xf32>
      %y = tensor.read %b[%k, %j] : !graph.tensor<5x8xf32>
      %p = arith.mulf %x, %y : f32
      tensor.yield %p : f32
    } : (!graph.tensor<7x5xf32>, !graph.tensor<5x8xf32>) -> !graph.tensor<7x8xf32>
    %r = tensor.compute(%c) {
    ^bb0(%i: i64, %j: i64):
      %v = tensor.read %c[%i, %j] : !graph.tensor<7x8xf32>
      %zero = arith.constant 0.0 : f32
      %m = arith.maximumf %v, %zero : f32
      tensor.yield %m : f32
    } : (!graph.tensor<7x8xf32>) -> !graph.tensor<7x8xf32>
    tensor.return %r : !graph.tensor<7x8xf32>
}

// -----

tensor.func @mm(%a: !graph.tensor<7x5xf32>, %b: !graph.tensor<5x8xf32>) -> !graph.tensor<7xf32> {
    // expected-error @+1 {{schedule: epilogue 1: op 1 after it is a reduction}}
    %c = tensor.compute(%a, %b) reduce [5] by "add" init 0.0 : f32 schedule #schedule.nest<tile [d0 = [4], d1 = [8]], interchange [d0.0, d1.0, r0, d0.1, d1.1], unroll [d0.1, d1.1], vectorize d1.1 x 4, epilogue 1> {
    ^bb0(%i: i64, %j: i64, %k: i64):
      %x = tensor.read %a[%i, %k] : !graph.tensor<7x5xf32>
      %y = tensor.read %b[%k, %j] : !graph.tensor<5x8xf32>
      %p = arith.mulf %x, %y : f32
      tensor.yield %p : f32
    } : (!graph.tensor<7x5xf32>, !graph.tensor<5x8xf32>) -> !graph.tensor<7x8xf32>
    %r = tensor.compute(%c) reduce [8] by "add" init 0.0 : f32 {
    ^bb0(%i: i64, %j: i64):
      %v = tensor.read %c[%i, %j] : !graph.tensor<7x8xf32>
      tensor.yield %v : f32
    } : (!graph.tensor<7x8xf32>) -> !graph.tensor<7xf32>
    tensor.return %r : !graph.tensor<7xf32>
}

// -----

tensor.func @mm(%a: !graph.tensor<7x5xf32>, %b: !graph.tensor<5x8xf32>) -> !graph.tensor<8x7xf32> {
    // expected-error @+1 {{schedule: epilogue 1: op 1 after it has another domain ((8, 7) instead of (7, 8))}}
    %c = tensor.compute(%a, %b) reduce [5] by "add" init 0.0 : f32 schedule #schedule.nest<tile [d0 = [4], d1 = [8]], interchange [d0.0, d1.0, r0, d0.1, d1.1], unroll [d0.1, d1.1], vectorize d1.1 x 4, epilogue 1> {
    ^bb0(%i: i64, %j: i64, %k: i64):
      %x = tensor.read %a[%i, %k] : !graph.tensor<7x5xf32>
      %y = tensor.read %b[%k, %j] : !graph.tensor<5x8xf32>
      %p = arith.mulf %x, %y : f32
      tensor.yield %p : f32
    } : (!graph.tensor<7x5xf32>, !graph.tensor<5x8xf32>) -> !graph.tensor<7x8xf32>
    %r = tensor.compute(%c) {
    ^bb0(%j: i64, %i: i64):
      %v = tensor.read %c[%i, %j] : !graph.tensor<7x8xf32>
      tensor.yield %v : f32
    } : (!graph.tensor<7x8xf32>) -> !graph.tensor<8x7xf32>
    tensor.return %r : !graph.tensor<8x7xf32>
}

// -----

tensor.func @mm(%a: !graph.tensor<7x5xf32>, %b: !graph.tensor<5x8xf32>) -> !graph.tensor<7x8xf32> {
    // expected-error @+1 {{schedule: epilogue 1: op 1 after it reads an earlier result at another point}}
    %c = tensor.compute(%a, %b) reduce [5] by "add" init 0.0 : f32 schedule #schedule.nest<tile [d0 = [4], d1 = [8]], interchange [d0.0, d1.0, r0, d0.1, d1.1], unroll [d0.1, d1.1], vectorize d1.1 x 4, epilogue 1> {
    ^bb0(%i: i64, %j: i64, %k: i64):
      %x = tensor.read %a[%i, %k] : !graph.tensor<7x5xf32>
      %y = tensor.read %b[%k, %j] : !graph.tensor<5x8xf32>
      %p = arith.mulf %x, %y : f32
      tensor.yield %p : f32
    } : (!graph.tensor<7x5xf32>, !graph.tensor<5x8xf32>) -> !graph.tensor<7x8xf32>
    %r = tensor.compute(%c) {
    ^bb0(%i: i64, %j: i64):
      %zero = arith.constant 0 : i64
      %v = tensor.read %c[%zero, %j] : !graph.tensor<7x8xf32>
      tensor.yield %v : f32
    } : (!graph.tensor<7x8xf32>) -> !graph.tensor<7x8xf32>
    tensor.return %r : !graph.tensor<7x8xf32>
}

// -----

tensor.func @mm(%a: !graph.tensor<7x5xf32>, %b: !graph.tensor<5x8xf32>) -> !graph.tensor<7x8xf32> {
    // expected-error @+1 {{schedule: epilogue: the accumulators must be in registers (the loops inside the reduction loops unrolled)}}
    %c = tensor.compute(%a, %b) reduce [5] by "add" init 0.0 : f32 schedule #schedule.nest<interchange [d0, r0, d1], epilogue 1> {
    ^bb0(%i: i64, %j: i64, %k: i64):
      %x = tensor.read %a[%i, %k] : !graph.tensor<7x5xf32>
      %y = tensor.read %b[%k, %j] : !graph.tensor<5x8xf32>
      %p = arith.mulf %x, %y : f32
      tensor.yield %p : f32
    } : (!graph.tensor<7x5xf32>, !graph.tensor<5x8xf32>) -> !graph.tensor<7x8xf32>
    %r = tensor.compute(%c) {
    ^bb0(%i: i64, %j: i64):
      %v = tensor.read %c[%i, %j] : !graph.tensor<7x8xf32>
      %zero = arith.constant 0.0 : f32
      %m = arith.maximumf %v, %zero : f32
      tensor.yield %m : f32
    } : (!graph.tensor<7x8xf32>) -> !graph.tensor<7x8xf32>
    tensor.return %r : !graph.tensor<7x8xf32>
}

// -----

tensor.func @ew(%a: !graph.tensor<7x8xf32>) -> !graph.tensor<7x8xf32> {
    // expected-error @+1 {{schedule: epilogue: only a reduction has one}}
    %c = tensor.compute(%a) schedule #schedule.nest<epilogue 1> {
    ^bb0(%i: i64, %j: i64):
      %v = tensor.read %a[%i, %j] : !graph.tensor<7x8xf32>
      tensor.yield %v : f32
    } : (!graph.tensor<7x8xf32>) -> !graph.tensor<7x8xf32>
    %r = tensor.compute(%c) {
    ^bb0(%i: i64, %j: i64):
      %v = tensor.read %c[%i, %j] : !graph.tensor<7x8xf32>
      %zero = arith.constant 0.0 : f32
      %m = arith.maximumf %v, %zero : f32
      tensor.yield %m : f32
    } : (!graph.tensor<7x8xf32>) -> !graph.tensor<7x8xf32>
    tensor.return %r : !graph.tensor<7x8xf32>
}

// -----

tensor.func @mm(%a: !graph.tensor<7x5xf32>, %b: !graph.tensor<5x8xf32>) -> !graph.tensor<7x8xf32> {
    %c = tensor.compute(%a, %b) reduce [5] by "add" init 0.0 : f32 schedule #schedule.nest<tile [d0 = [4], d1 = [8]], interchange [d0.0, d1.0, r0, d0.1, d1.1], unroll [d0.1, d1.1], vectorize d1.1 x 4, epilogue 1> {
    ^bb0(%i: i64, %j: i64, %k: i64):
      %x = tensor.read %a[%i, %k] : !graph.tensor<7x5xf32>
      %y = tensor.read %b[%k, %j] : !graph.tensor<5x8xf32>
      %p = arith.mulf %x, %y : f32
      tensor.yield %p : f32
    } : (!graph.tensor<7x5xf32>, !graph.tensor<5x8xf32>) -> !graph.tensor<7x8xf32>
    // expected-error @+1 {{not supported by the code generator yet: epilogue: math.sin depends on the vectorized index}}
    %r = tensor.compute(%c) {
    ^bb0(%i: i64, %j: i64):
      %v = tensor.read %c[%i, %j] : !graph.tensor<7x8xf32>
      %m = math.sin %v : f32
      tensor.yield %m : f32
    } : (!graph.tensor<7x8xf32>) -> !graph.tensor<7x8xf32>
    tensor.return %r : !graph.tensor<7x8xf32>
}

// -----

tensor.func @mm(%a: !graph.tensor<7x5xf32>, %b: !graph.tensor<5x8xf32>) -> !graph.tensor<7x8xf32> {
    // expected-error @+1 {{schedule: epilogue 1: op 1 after it is in a fusion group or has an epilogue}}
    %c = tensor.compute(%a, %b) reduce [5] by "add" init 0.0 : f32 schedule #schedule.nest<tile [d0 = [4], d1 = [8]], interchange [d0.0, d1.0, r0, d0.1, d1.1], unroll [d0.1, d1.1], vectorize d1.1 x 4, epilogue 1> {
    ^bb0(%i: i64, %j: i64, %k: i64):
      %x = tensor.read %a[%i, %k] : !graph.tensor<7x5xf32>
      %y = tensor.read %b[%k, %j] : !graph.tensor<5x8xf32>
      %p = arith.mulf %x, %y : f32
      tensor.yield %p : f32
    } : (!graph.tensor<7x5xf32>, !graph.tensor<5x8xf32>) -> !graph.tensor<7x8xf32>
    %r = tensor.compute(%c) schedule #schedule.nest<group 3 at 1> {
    ^bb0(%i: i64, %j: i64):
      %v = tensor.read %c[%i, %j] : !graph.tensor<7x8xf32>
      %zero = arith.constant 0.0 : f32
      %m = arith.maximumf %v, %zero : f32
      tensor.yield %m : f32
    } : (!graph.tensor<7x8xf32>) -> !graph.tensor<7x8xf32>
    tensor.return %r : !graph.tensor<7x8xf32>
}
