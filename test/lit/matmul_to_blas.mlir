// RUN: ember-opt %s --ember-matmul-to-blas | filecheck %s

// CHECK: llvm.func @sgemm_batch_
// CHECK: llvm.func @sgemm_(
// CHECK: func.func private @ember_sgemm
// A batch goes to MKL in chunks of up to 256 pointer triples, one element alone to sgemm_.
// CHECK: llvm.alloca %{{.*}} x !llvm.ptr
// CHECK: scf.if
// CHECK: llvm.call @sgemm_batch_
// CHECK: } else {
// CHECK: llvm.call @sgemm_(

// CHECK-LABEL: func.func @mm
// CHECK-NOT: linalg.matmul
// CHECK: memref.extract_aligned_pointer_as_index
// CHECK: %[[N:.*]] = arith.constant 78 : i8
// CHECK: call @ember_sgemm({{.*}}%[[N]]
func.func @mm(%a: memref<8x64xf32>, %b: memref<64x32xf32>, %c: memref<8x32xf32>) {
  linalg.matmul ins(%a, %b : memref<8x64xf32>, memref<64x32xf32>) outs(%c : memref<8x32xf32>)
  return
}

// Batched: one call, the batch loop lives in the helper.
// CHECK-LABEL: func.func @bmm
// CHECK: call @ember_sgemm
// CHECK-NOT: linalg.batch_matmul
func.func @bmm(%a: memref<3x8x64xf32>, %b: memref<3x64x32xf32>, %c: memref<3x8x32xf32>) {
  linalg.batch_matmul ins(%a, %b : memref<3x8x64xf32>, memref<3x64x32xf32>) outs(%c : memref<3x8x32xf32>)
  return
}

// f64 is left to the loop lowering.
// CHECK-LABEL: func.func @mm_f64
// CHECK: linalg.matmul
func.func @mm_f64(%a: memref<8x4xf64>, %b: memref<4x2xf64>, %c: memref<8x2xf64>) {
  linalg.matmul ins(%a, %b : memref<8x4xf64>, memref<4x2xf64>) outs(%c : memref<8x2xf64>)
  return
}

// A column-strided operand (inner stride 2) is not BLAS-compatible: left as is.
// CHECK-LABEL: func.func @mm_strided
// CHECK: linalg.matmul
func.func @mm_strided(%a: memref<8x4xf32, strided<[8, 2]>>, %b: memref<4x2xf32>, %c: memref<8x2xf32>) {
  linalg.matmul ins(%a, %b : memref<8x4xf32, strided<[8, 2]>>, memref<4x2xf32>) outs(%c : memref<8x2xf32>)
  return
}

// A zero fill right before the matmul (views in between touch no memory) is dropped:
// sgemm runs with beta = 0. A fill of another value, or one with a write in between,
// stays and beta is 1.
// CHECK-LABEL: func.func @mm_zero_init
// CHECK-NOT: linalg.fill
// CHECK: memref.extract_aligned_pointer_as_index
// CHECK: %[[B0:.*]] = arith.constant 0.000000e+00 : f32
// CHECK: call @ember_sgemm({{.*}}, %[[B0]]) :
func.func @mm_zero_init(%a: memref<8x64xf32>, %b: memref<64x32xf32>, %c: memref<8x32xf32>) {
  %z = arith.constant 0.0 : f32
  linalg.fill ins(%z : f32) outs(%c : memref<8x32xf32>)
  %v = memref.collapse_shape %a [[0, 1]] : memref<8x64xf32> into memref<512xf32>
  linalg.matmul ins(%a, %b : memref<8x64xf32>, memref<64x32xf32>) outs(%c : memref<8x32xf32>)
  return
}

// CHECK-LABEL: func.func @mm_one_init
// CHECK: linalg.fill
// CHECK: memref.extract_aligned_pointer_as_index
// CHECK: %[[B1:.*]] = arith.constant 1.000000e+00 : f32
// CHECK: call @ember_sgemm({{.*}}, %[[B1]])
func.func @mm_one_init(%a: memref<8x64xf32>, %b: memref<64x32xf32>, %c: memref<8x32xf32>) {
  %one = arith.constant 1.0 : f32
  linalg.fill ins(%one : f32) outs(%c : memref<8x32xf32>)
  linalg.matmul ins(%a, %b : memref<8x64xf32>, memref<64x32xf32>) outs(%c : memref<8x32xf32>)
  return
}

// CHECK-LABEL: func.func @mm_write_between
// CHECK: linalg.fill
// CHECK: linalg.copy
// CHECK: memref.extract_aligned_pointer_as_index
// CHECK: %[[B2:.*]] = arith.constant 1.000000e+00 : f32
// CHECK: call @ember_sgemm({{.*}}, %[[B2]])
func.func @mm_write_between(%a: memref<8x64xf32>, %b: memref<64x32xf32>, %c: memref<8x32xf32>, %d: memref<8x32xf32>) {
  %z = arith.constant 0.0 : f32
  linalg.fill ins(%z : f32) outs(%c : memref<8x32xf32>)
  linalg.copy ins(%d : memref<8x32xf32>) outs(%c : memref<8x32xf32>)
  linalg.matmul ins(%a, %b : memref<8x64xf32>, memref<64x32xf32>) outs(%c : memref<8x32xf32>)
  return
}
