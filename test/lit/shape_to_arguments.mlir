// RUN: ember-opt %s --ember-shape-to-arguments --canonicalize | filecheck %s
// The sizes calling convention: symbols become trailing index arguments (a divisor fact
// as (s / 8) * 8), every buffer a bare pointer (0-d memref) re-viewed with its sizes,
// and the result is computed in its out-param instead of being copied there.

// CHECK-LABEL: func.func @forward
// CHECK-SAME: (%[[IN:.*]]: memref<f32>, %[[OUT:.*]]: memref<f32>, %[[S0:.*]]: index)
// CHECK-NOT: ember_shape
// CHECK: %[[Q:.*]] = arith.divui %[[S0]], %c8
// CHECK: %[[N:.*]] = arith.muli %[[Q]], %c8
// CHECK: memref.reinterpret_cast %[[IN]] to offset: [0], sizes: [%[[N]], 4], strides: [4, 1]
// CHECK: %[[OV:.*]] = memref.reinterpret_cast %[[OUT]] to offset: [0], sizes: [%[[N]], 4], strides: [4, 1]
// CHECK-NOT: memref.alloc
// CHECK-NOT: memref.copy
// CHECK: linalg.generic {{.*}} outs(%[[OV]] : memref<?x4xf32>)
func.func @forward(%arg0: memref<?x4xf32> {ember_shape.shape = affine_map<()[s0] -> (s0, 4)>},
                   %arg1: memref<?x4xf32>)
    attributes {ember_shape.result_shapes = [affine_map<()[s0] -> (s0, 4)>], ember_shape.symbols = ["s0"]} {
  %s0 = "ember_shape.symbol"() {name = "s0", min = 8 : i64, max = 4096 : i64, divisor = 8 : i64} : () -> index
  %buf = memref.alloc(%s0) : memref<?x4xf32>
  linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0, d1)>],
                  iterator_types = ["parallel", "parallel"]}
      ins(%arg0 : memref<?x4xf32>) outs(%buf : memref<?x4xf32>) {
  ^bb0(%in: f32, %out: f32):
    %r = arith.addf %in, %in : f32
    linalg.yield %r : f32
  }
  memref.copy %buf, %arg1 : memref<?x4xf32> to memref<?x4xf32>
  return
}
