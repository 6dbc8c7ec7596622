// RUN: ember-opt %s --ember-gpu-contractions-to-calls | filecheck %s

#a = affine_map<(d0, d1, d2) -> (d0, d2)>
#bt = affine_map<(d0, d1, d2) -> (d1, d2)>
#c = affine_map<(d0, d1, d2) -> (d0, d1)>
#id = affine_map<(d0, d1) -> (d0, d1)>

// A multiply-accumulate generic (matmul with B transposed) becomes a BLAS call of the
// host plan, its einsum equation read from the maps.
// CHECK: func.func private @ember_gpu_contract_0(memref<4x16xf32>, memref<32x16xf32>, memref<4x32xf32>)
// CHECK-LABEL: func.func @matmul_bt
// CHECK-NOT: linalg.generic
// CHECK: call @ember_gpu_contract_0(%arg0, %arg1, %arg2) {ember.einsum = "ac,bc->ab"}
func.func @matmul_bt(%a: memref<4x16xf32>, %b: memref<32x16xf32>, %c: memref<4x32xf32>) {
  linalg.generic {indexing_maps = [#a, #bt, #c], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%a, %b : memref<4x16xf32>, memref<32x16xf32>) outs(%c : memref<4x32xf32>) {
  ^bb0(%x: f32, %y: f32, %acc: f32):
    %m = arith.mulf %x, %y : f32
    %s = arith.addf %acc, %m : f32
    linalg.yield %s : f32
  }
  return
}

// A reduction that is not a multiply-accumulate stays an ember kernel.
// CHECK-LABEL: func.func @max_of_products
// CHECK: linalg.generic
// CHECK-NOT: call @ember_gpu_contract
func.func @max_of_products(%a: memref<4x16xf32>, %b: memref<32x16xf32>, %c: memref<4x32xf32>) {
  linalg.generic {indexing_maps = [#a, #bt, #c], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%a, %b : memref<4x16xf32>, memref<32x16xf32>) outs(%c : memref<4x32xf32>) {
  ^bb0(%x: f32, %y: f32, %acc: f32):
    %m = arith.mulf %x, %y : f32
    %s = arith.maximumf %acc, %m : f32
    linalg.yield %s : f32
  }
  return
}

// Elementwise multiply-add without a reduction stays a kernel too.
// CHECK-LABEL: func.func @fma
// CHECK: linalg.generic
func.func @fma(%a: memref<4x4xf32>, %b: memref<4x4xf32>, %c: memref<4x4xf32>) {
  linalg.generic {indexing_maps = [#id, #id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%a, %b : memref<4x4xf32>, memref<4x4xf32>) outs(%c : memref<4x4xf32>) {
  ^bb0(%x: f32, %y: f32, %acc: f32):
    %m = arith.mulf %x, %y : f32
    %s = arith.addf %acc, %m : f32
    linalg.yield %s : f32
  }
  return
}
