// RUN: ember-opt %s --split-input-file --ember-lower-tm-tensor --inline --symbol-dce | filecheck %s

// index_put(accumulate=True): one loop per update dim (the inliner folds the 1-trip one), bounds-checked, negative indices
// wrapped, the region's addf in the loop body; the argument becomes read-only so that
// bufferization copies it instead of writing into the caller's tensor.
// CHECK-LABEL: func.func @index_put
// CHECK-SAME: %arg0: tensor<10x5xf32> {bufferization.writable = false}
// CHECK-NOT: tm_tensor
// CHECK: scf.for %{{.*}} = %c0 to %c3
// CHECK: scf.for %{{.*}} = %c0 to %c5
// CHECK: tensor.extract %arg1
// CHECK: arith.cmpi slt
// CHECK: arith.select
// CHECK: scf.if
// CHECK: arith.addf
// CHECK: tensor.insert
// CHECK-NOT: func.call
func.func @index_put(%arg0: tensor<10x5xf32>, %arg1: tensor<3x1xi64>, %arg2: tensor<3x1x5xf32>) -> tensor<10x5xf32> {
  %0 = tm_tensor.scatter {dimension_map = array<i64: 0>} unique_indices(false) ins(%arg2, %arg1 : tensor<3x1x5xf32>, tensor<3x1xi64>) outs(%arg0 : tensor<10x5xf32>) {
  ^bb0(%u: f32, %o: f32):
    %1 = arith.addf %o, %u : f32
    tm_tensor.yield %1 : f32
  } -> tensor<10x5xf32>
  return %0 : tensor<10x5xf32>
}

// -----

// cumsum: the first element is copied, then out[k] = out[k-1] + in[k].
// CHECK-LABEL: func.func @cumsum
// CHECK-NOT: tm_tensor
// CHECK: scf.for
// CHECK: tensor.extract %arg0
// CHECK: tensor.insert
// CHECK: scf.for {{.*}} iter_args({{.*}}) -> (tensor<4x6xf32>, f32)
// CHECK: arith.addf
func.func @cumsum(%arg0: tensor<4x6xf32>, %out: tensor<4x6xf32>, %acc: tensor<4xf32>) -> tensor<4x6xf32> {
  %0:2 = tm_tensor.scan dimension(1) inclusive(true) ins(%arg0 : tensor<4x6xf32>) outs(%out, %acc : tensor<4x6xf32>, tensor<4xf32>) {
  ^bb0(%a: f32, %b: f32):
    %1 = arith.addf %a, %b : f32
    tm_tensor.yield %1 : f32
  } -> tensor<4x6xf32>, tensor<4xf32>
  return %0#0 : tensor<4x6xf32>
}

// -----

// Ascending float sort: a merge sort whose comparator puts NaN last (uno on the right
// operand, or'ed with ole).
// CHECK-LABEL: func.func @sort
// CHECK-NOT: tm_tensor
// CHECK: arith.shli
// CHECK: arith.cmpf uno
// CHECK: arith.cmpf ole
// CHECK: arith.ori
// CHECK: arith.select
func.func @sort(%arg0: tensor<4x6xf32>, %arg1: tensor<4x6xi64>) -> (tensor<4x6xf32>, tensor<4x6xi64>) {
  %0:2 = tm_tensor.sort dimension(1) outs(%arg0, %arg1 : tensor<4x6xf32>, tensor<4x6xi64>) {
  ^bb0(%a: f32, %b: f32, %c: i64, %d: i64):
    %1 = arith.cmpf ole, %a, %b : f32
    tm_tensor.yield %1 : i1
  } -> tensor<4x6xf32>, tensor<4x6xi64>
  return %0#0, %0#1 : tensor<4x6xf32>, tensor<4x6xi64>
}
