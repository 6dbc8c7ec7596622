// RUN: ember-opt %s --ember-generalize-data-movement | filecheck %s

// CHECK-DAG: #[[ID:.*]] = affine_map<(d0, d1, d2) -> (d0, d1, d2)>
// CHECK-DAG: #[[PERM:.*]] = affine_map<(d0, d1, d2) -> (d2, d0, d1)>
// CHECK-DAG: #[[BCAST:.*]] = affine_map<(d0, d1, d2) -> (d0, d2)>

// Output dim i is input dim perm[i]: the input is read through the inverse permutation.
// CHECK-LABEL: func.func @transpose
// CHECK-NOT: linalg.transpose
// CHECK: linalg.generic {indexing_maps = [#[[PERM]], #[[ID]]], iterator_types = ["parallel", "parallel", "parallel"]}
// CHECK: linalg.yield
func.func @transpose(%x: tensor<2x3x4xf32>) -> tensor<3x4x2xf32> {
  %e = tensor.empty() : tensor<3x4x2xf32>
  %t = linalg.transpose ins(%x : tensor<2x3x4xf32>) outs(%e : tensor<3x4x2xf32>) permutation = [1, 2, 0]
  return %t : tensor<3x4x2xf32>
}

// CHECK-LABEL: func.func @broadcast
// CHECK-NOT: linalg.broadcast
// CHECK: linalg.generic {indexing_maps = [#[[BCAST]], #[[ID]]]
func.func @broadcast(%x: tensor<2x4xf32>) -> tensor<2x3x4xf32> {
  %e = tensor.empty() : tensor<2x3x4xf32>
  %b = linalg.broadcast ins(%x : tensor<2x4xf32>) outs(%e : tensor<2x3x4xf32>) dimensions = [1]
  return %b : tensor<2x3x4xf32>
}

// Memref forms have nothing to fuse with: left alone.
// CHECK-LABEL: func.func @on_memrefs
// CHECK: linalg.transpose
func.func @on_memrefs(%x: memref<2x3xf32>, %y: memref<3x2xf32>) {
  linalg.transpose ins(%x : memref<2x3xf32>) outs(%y : memref<3x2xf32>) permutation = [1, 0]
  return
}
