// RUN: ember-opt %s --ember-fold-transpose-into-matmul | filecheck %s
// RUN: ember-opt %s --pass-pipeline='builtin.module(ember-fold-transpose-into-matmul,one-shot-bufferize{bufferize-function-boundaries function-boundary-type-conversion=identity-layout-map},ember-matmul-to-blas)' | filecheck %s --check-prefix=BLAS

// CHECK-DAG: #[[B:.*]] = affine_map<(d0, d1, d2) -> (d1, d2)>
// CHECK-DAG: #[[AT:.*]] = affine_map<(d0, d1, d2) -> (d2, d0)>
// CHECK-DAG: #[[BA:.*]] = affine_map<(d0, d1, d2, d3) -> (d0, d3, d1)>
// CHECK-DAG: #[[BB:.*]] = affine_map<(d0, d1, d2, d3) -> (d0, d2, d3)>
// CHECK-LABEL: func.func @linear
// CHECK-NOT: linalg.transpose
// CHECK: linalg.matmul indexing_maps = [#{{.*}}, #[[B]], #{{.*}}] ins(%arg0, %arg1 : tensor<8x64xf32>, tensor<32x64xf32>)

// The transposed map becomes BLAS's trans flag ('T' = 84) on B.
// BLAS-LABEL: func.func @linear
// BLAS-DAG: %[[N:.*]] = arith.constant 78 : i8
// BLAS-DAG: %[[T:.*]] = arith.constant 84 : i8
// BLAS: call @ember_sgemm({{.*}}, %[[N]], {{.*}}, %[[T]], {{.*}})
func.func @linear(%x: tensor<8x64xf32>, %w: tensor<32x64xf32>) -> tensor<8x32xf32> {
  %zero = arith.constant 0.0 : f32
  %et = tensor.empty() : tensor<64x32xf32>
  %t = linalg.transpose ins(%w : tensor<32x64xf32>) outs(%et : tensor<64x32xf32>) permutation = [1, 0]
  %e = tensor.empty() : tensor<8x32xf32>
  %f = linalg.fill ins(%zero : f32) outs(%e : tensor<8x32xf32>) -> tensor<8x32xf32>
  %mm = linalg.matmul ins(%x, %t : tensor<8x64xf32>, tensor<64x32xf32>) outs(%f : tensor<8x32xf32>) -> tensor<8x32xf32>
  return %mm : tensor<8x32xf32>
}

// A transpose that is not of the matrix dims stays.
// CHECK-LABEL: func.func @batch_other_perm
// CHECK: linalg.transpose
func.func @batch_other_perm(%x: tensor<2x8x4xf32>, %w: tensor<4x2x5xf32>) -> tensor<2x8x5xf32> {
  %zero = arith.constant 0.0 : f32
  %et = tensor.empty() : tensor<2x4x5xf32>
  %t = linalg.transpose ins(%w : tensor<4x2x5xf32>) outs(%et : tensor<2x4x5xf32>) permutation = [1, 0, 2]
  %e = tensor.empty() : tensor<2x8x5xf32>
  %f = linalg.fill ins(%zero : f32) outs(%e : tensor<2x8x5xf32>) -> tensor<2x8x5xf32>
  %mm = linalg.batch_matmul ins(%x, %t : tensor<2x8x4xf32>, tensor<2x4x5xf32>) outs(%f : tensor<2x8x5xf32>) -> tensor<2x8x5xf32>
  return %mm : tensor<2x8x5xf32>
}

// A weight gradient, grad.t() @ x: the transpose on A folds too ('T' on A, 'N' on B).
// CHECK-LABEL: func.func @weight_gradient
// CHECK-NOT: linalg.transpose
// CHECK: linalg.matmul indexing_maps = [#[[AT]], #{{.*}}, #{{.*}}] ins(%arg0, %arg1 : tensor<512x96xf32>, tensor<512x32xf32>)
// BLAS-LABEL: func.func @weight_gradient
// BLAS-DAG: %[[N:.*]] = arith.constant 78 : i8
// BLAS-DAG: %[[T:.*]] = arith.constant 84 : i8
// BLAS: call @ember_sgemm({{.*}}, %[[T]], {{.*}}, %[[N]], {{.*}})
func.func @weight_gradient(%g: tensor<512x96xf32>, %x: tensor<512x32xf32>) -> tensor<96x32xf32> {
  %zero = arith.constant 0.0 : f32
  %et = tensor.empty() : tensor<96x512xf32>
  %t = linalg.transpose ins(%g : tensor<512x96xf32>) outs(%et : tensor<96x512xf32>) permutation = [1, 0]
  %e = tensor.empty() : tensor<96x32xf32>
  %f = linalg.fill ins(%zero : f32) outs(%e : tensor<96x32xf32>) -> tensor<96x32xf32>
  %mm = linalg.matmul ins(%t, %x : tensor<96x512xf32>, tensor<512x32xf32>) outs(%f : tensor<96x32xf32>) -> tensor<96x32xf32>
  return %mm : tensor<96x32xf32>
}

// Both operands of a batched matmul transposed (attention's backward): one call, both 'T'.
// CHECK-LABEL: func.func @batch_both_transposed
// CHECK-NOT: linalg.transpose
// CHECK: linalg.batch_matmul indexing_maps = [#[[BA]], #[[BB]], #{{.*}}] ins(%arg0, %arg1 : tensor<4x16x8xf32>, tensor<4x5x16xf32>)
// BLAS-LABEL: func.func @batch_both_transposed
// BLAS: call @ember_sgemm({{[^)]*}}, %c84_i8{{[_0-9]*}}, {{[^)]*}}, %c84_i8{{[_0-9]*}}, {{[^)]*}})
func.func @batch_both_transposed(%p: tensor<4x16x8xf32>, %v: tensor<4x5x16xf32>) -> tensor<4x8x5xf32> {
  %zero = arith.constant 0.0 : f32
  %e1 = tensor.empty() : tensor<4x8x16xf32>
  %pt = linalg.transpose ins(%p : tensor<4x16x8xf32>) outs(%e1 : tensor<4x8x16xf32>) permutation = [0, 2, 1]
  %e2 = tensor.empty() : tensor<4x16x5xf32>
  %vt = linalg.transpose ins(%v : tensor<4x5x16xf32>) outs(%e2 : tensor<4x16x5xf32>) permutation = [0, 2, 1]
  %e = tensor.empty() : tensor<4x8x5xf32>
  %f = linalg.fill ins(%zero : f32) outs(%e : tensor<4x8x5xf32>) -> tensor<4x8x5xf32>
  %mm = linalg.batch_matmul ins(%pt, %vt : tensor<4x8x16xf32>, tensor<4x16x5xf32>) outs(%f : tensor<4x8x5xf32>) -> tensor<4x8x5xf32>
  return %mm : tensor<4x8x5xf32>
}
