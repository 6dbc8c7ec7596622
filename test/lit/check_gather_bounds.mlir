// RUN: ember-opt %s --ember-check-gather-bounds | filecheck %s

#in = affine_map<(d0, d1) -> (d0)>
#out = affine_map<(d0, d1) -> (d0, d1)>

// An index read from data (embedding) is checked against the table's size and clamped;
// the column index, a loop position, is not.
// CHECK-LABEL: func.func @embedding
// CHECK: %[[I:.*]] = arith.index_cast %{{.*}} : i64 to index
// CHECK: %[[J:.*]] = linalg.index 1 : index
// CHECK-DAG: %[[ZERO:.*]] = arith.constant 0 : index
// CHECK-DAG: %[[ROWS:.*]] = arith.constant 10 : index
// CHECK: %[[LOW:.*]] = arith.cmpi sge, %[[I]], %[[ZERO]]
// CHECK: %[[HIGH:.*]] = arith.cmpi slt, %[[I]], %[[ROWS]]
// CHECK: %[[OK:.*]] = arith.andi %[[LOW]], %[[HIGH]]
// CHECK: cf.assert %[[OK]], "index out of range in self
// CHECK: %[[SAFE:.*]] = arith.select %[[OK]], %[[I]], %[[ZERO]]
// CHECK: tensor.extract %arg1[%[[SAFE]], %[[J]]]
// CHECK-NOT: cf.assert
func.func @embedding(%ids: tensor<3xi64>, %w: tensor<10x4xf32>) -> tensor<3x4xf32> {
  %e = tensor.empty() : tensor<3x4xf32>
  %r = linalg.generic {indexing_maps = [#in, #out], iterator_types = ["parallel", "parallel"]}
      ins(%ids : tensor<3xi64>) outs(%e : tensor<3x4xf32>) {
  ^bb0(%id: i64, %o: f32):
    %i = arith.index_cast %id : i64 to index
    %j = linalg.index 1 : index
    %v = tensor.extract %w[%i, %j] : tensor<10x4xf32>
    linalg.yield %v : f32
  } -> tensor<3x4xf32>
  return %r : tensor<3x4xf32>
}

// Positions computed from loop indices alone (a transpose by extract) are left alone.
// CHECK-LABEL: func.func @transpose_by_extract
// CHECK-NOT: cf.assert
func.func @transpose_by_extract(%w: tensor<4x4xf32>) -> tensor<4x4xf32> {
  %e = tensor.empty() : tensor<4x4xf32>
  %r = linalg.generic {indexing_maps = [#out], iterator_types = ["parallel", "parallel"]}
      outs(%e : tensor<4x4xf32>) {
  ^bb0(%o: f32):
    %i = linalg.index 0 : index
    %j = linalg.index 1 : index
    %v = tensor.extract %w[%j, %i] : tensor<4x4xf32>
    linalg.yield %v : f32
  } -> tensor<4x4xf32>
  return %r : tensor<4x4xf32>
}
