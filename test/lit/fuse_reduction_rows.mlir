// RUN: ember-opt %s --split-input-file --ember-fuse-reduction-rows | filecheck %s

// Softmax over rows: max, exp-and-sum, divide become ONE scf.forall over the 8x512 rows,
// each iteration working on a 1x1x128 slice; the row temporaries are per-row tensors.
// CHECK-LABEL: func.func @softmax_rows
// CHECK: scf.forall (%[[I:.*]], %[[J:.*]]) in (8, 512)
// CHECK: tensor.extract_slice %arg0[%[[I]], %[[J]], 0] [1, 1, 128] [1, 1, 1]
// CHECK: linalg.generic {{.*}}iterator_types = ["parallel", "parallel", "reduction"]{{.*}} tensor<1x1x128xf32>
// CHECK: arith.maximumf
// CHECK: linalg.generic {{.*}}iterator_types = ["parallel", "parallel", "reduction"]{{.*}} tensor<1x1x128xf32>
// CHECK: math.exp
// CHECK: linalg.generic {{.*}}iterator_types = ["parallel", "parallel", "parallel"]
// CHECK: arith.divf
// CHECK: scf.forall.in_parallel
// CHECK: tensor.parallel_insert_slice
// CHECK-NOT: linalg.generic
// CHECK: return
#x = affine_map<(d0, d1, d2) -> (d0, d1, d2)>
#r = affine_map<(d0, d1, d2) -> (d0, d1)>
func.func @softmax_rows(%x: tensor<8x512x128xf32>) -> tensor<8x512x128xf32> {
  %ninf = arith.constant 0xFF800000 : f32
  %zero = arith.constant 0.0 : f32
  %er = tensor.empty() : tensor<8x512xf32>
  %m0 = linalg.fill ins(%ninf : f32) outs(%er : tensor<8x512xf32>) -> tensor<8x512xf32>
  %m = linalg.generic {indexing_maps = [#x, #r], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%x : tensor<8x512x128xf32>) outs(%m0 : tensor<8x512xf32>) {
  ^bb0(%in: f32, %out: f32):
    %0 = arith.maximumf %in, %out : f32
    linalg.yield %0 : f32
  } -> tensor<8x512xf32>
  %s0 = linalg.fill ins(%zero : f32) outs(%er : tensor<8x512xf32>) -> tensor<8x512xf32>
  %s = linalg.generic {indexing_maps = [#x, #r, #r], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%x, %m : tensor<8x512x128xf32>, tensor<8x512xf32>) outs(%s0 : tensor<8x512xf32>) {
  ^bb0(%in: f32, %mx: f32, %out: f32):
    %0 = arith.subf %in, %mx : f32
    %1 = math.exp %0 : f32
    %2 = arith.addf %1, %out : f32
    linalg.yield %2 : f32
  } -> tensor<8x512xf32>
  %e = tensor.empty() : tensor<8x512x128xf32>
  %y = linalg.generic {indexing_maps = [#x, #r, #r, #x], iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%x, %m, %s : tensor<8x512x128xf32>, tensor<8x512xf32>, tensor<8x512xf32>) outs(%e : tensor<8x512x128xf32>) {
  ^bb0(%in: f32, %mx: f32, %sum: f32, %out: f32):
    %0 = arith.subf %in, %mx : f32
    %1 = math.exp %0 : f32
    %2 = arith.divf %1, %sum : f32
    linalg.yield %2 : f32
  } -> tensor<8x512x128xf32>
  return %y : tensor<8x512x128xf32>
}

// -----

// A reduction whose result is a graph output (used outside the chain) is not fused, and
// a chain without a reduction (plain elementwise) is left alone.
// CHECK-LABEL: func.func @sum_also_returned
// CHECK-NOT: scf.forall
// CHECK: return
#x2 = affine_map<(d0, d1) -> (d0, d1)>
#r2 = affine_map<(d0, d1) -> (d0)>
func.func @sum_also_returned(%x: tensor<64x128xf32>) -> (tensor<64x128xf32>, tensor<64xf32>) {
  %zero = arith.constant 0.0 : f32
  %er = tensor.empty() : tensor<64xf32>
  %s0 = linalg.fill ins(%zero : f32) outs(%er : tensor<64xf32>) -> tensor<64xf32>
  %s = linalg.generic {indexing_maps = [#x2, #r2], iterator_types = ["parallel", "reduction"]}
      ins(%x : tensor<64x128xf32>) outs(%s0 : tensor<64xf32>) {
  ^bb0(%in: f32, %out: f32):
    %0 = arith.addf %in, %out : f32
    linalg.yield %0 : f32
  } -> tensor<64xf32>
  %e = tensor.empty() : tensor<64x128xf32>
  %y = linalg.generic {indexing_maps = [#x2, #r2, #x2], iterator_types = ["parallel", "parallel"]}
      ins(%x, %s : tensor<64x128xf32>, tensor<64xf32>) outs(%e : tensor<64x128xf32>) {
  ^bb0(%in: f32, %sum: f32, %out: f32):
    %0 = arith.divf %in, %sum : f32
    linalg.yield %0 : f32
  } -> tensor<64x128xf32>
  return %y, %s : tensor<64x128xf32>, tensor<64xf32>
}
