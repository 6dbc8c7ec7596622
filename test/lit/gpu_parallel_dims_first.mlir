// RUN: ember-opt %s --ember-gpu-parallel-dims-first | filecheck %s

// A column reduction: its reduction loop is moved inside the parallel one.
// CHECK-DAG: #[[IN:.*]] = affine_map<(d0, d1) -> (d1, d0)>
// CHECK-DAG: #[[OUT:.*]] = affine_map<(d0, d1) -> (d0)>
// CHECK-LABEL: func.func @column_max
// CHECK: linalg.generic {indexing_maps = [#[[IN]], #[[OUT]]], iterator_types = ["parallel", "reduction"]}
// CHECK: linalg.index 0
func.func @column_max(%a: tensor<9x10xf32>, %init: tensor<10xf32>) -> tensor<10xf32> {
  %r = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d1)>],
                       iterator_types = ["reduction", "parallel"]}
      ins(%a : tensor<9x10xf32>) outs(%init : tensor<10xf32>) {
  ^bb0(%x: f32, %acc: f32):
    %i = linalg.index 1 : index
    %m = arith.maximumf %x, %acc : f32
    linalg.yield %m : f32
  } -> tensor<10xf32>
  return %r : tensor<10xf32>
}
