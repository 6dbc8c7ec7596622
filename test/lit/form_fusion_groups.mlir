// RUN: ember-opt %s --ember-form-fusion-groups | filecheck %s
// RUN: ember-opt %s --ember-form-fusion-groups --ember-lower-fusion-groups --canonicalize | filecheck %s --check-prefix=LOWER

#id = affine_map<(d0, d1) -> (d0, d1)>
#row = affine_map<(d0, d1) -> (d1)>

// relu(x @ w + b) * 2: the GEMM and its epilogue form one group; after lowering the
// epilogue is a single linalg.generic.
// CHECK-LABEL: func.func @matmul_epilogue
// CHECK: "ember_fusion.group"() ({
// CHECK:   linalg.fill
// CHECK:   linalg.matmul
// CHECK:   linalg.generic
// CHECK:   linalg.generic
// CHECK:   linalg.generic
// CHECK:   "ember_fusion.yield"
// CHECK: }) {kind = "matmul_epilogue"
// CHECK-NOT: ember_fusion.group
// CHECK: return

// LOWER-LABEL: func.func @matmul_epilogue
// LOWER-NOT: ember_fusion
// LOWER: linalg.matmul
// LOWER: linalg.generic
// LOWER: arith.addf
// LOWER: arith.maximumf
// LOWER: arith.mulf
// LOWER-NOT: linalg.generic
// LOWER: return
func.func @matmul_epilogue(%x: tensor<8x64xf32>, %w: tensor<64x32xf32>, %b: tensor<32xf32>) -> tensor<8x32xf32> {
  %zero = arith.constant 0.0 : f32
  %two = arith.constant 2.0 : f32
  %e = tensor.empty() : tensor<8x32xf32>
  %f = linalg.fill ins(%zero : f32) outs(%e : tensor<8x32xf32>) -> tensor<8x32xf32>
  %mm = linalg.matmul ins(%x, %w : tensor<8x64xf32>, tensor<64x32xf32>) outs(%f : tensor<8x32xf32>) -> tensor<8x32xf32>
  %add = linalg.generic {indexing_maps = [#id, #row, #id], iterator_types = ["parallel", "parallel"]}
      ins(%mm, %b : tensor<8x32xf32>, tensor<32xf32>) outs(%e : tensor<8x32xf32>) {
  ^bb0(%i: f32, %j: f32, %o: f32):
    %s = arith.addf %i, %j : f32
    linalg.yield %s : f32
  } -> tensor<8x32xf32>
  %relu = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%add : tensor<8x32xf32>) outs(%e : tensor<8x32xf32>) {
  ^bb0(%i: f32, %o: f32):
    %m = arith.maximumf %i, %zero : f32
    linalg.yield %m : f32
  } -> tensor<8x32xf32>
  %mul = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%relu : tensor<8x32xf32>) outs(%e : tensor<8x32xf32>) {
  ^bb0(%i: f32, %o: f32):
    %m = arith.mulf %i, %two : f32
    linalg.yield %m : f32
  } -> tensor<8x32xf32>
  return %mul : tensor<8x32xf32>
}

// Two reductions never share a group; the elementwise prologue joins the first.
// CHECK-LABEL: func.func @two_reductions
// CHECK: "ember_fusion.group"() ({
// CHECK:   linalg.generic {{.*}}["parallel", "parallel"]
// CHECK:   linalg.generic {{.*}}["parallel", "reduction"]
// CHECK: }) {kind = "reduction"
// CHECK: "ember_fusion.group"() ({
// CHECK:   linalg.generic {{.*}}["reduction"]
// CHECK: }) {kind = "reduction"
#col = affine_map<(d0, d1) -> (d0)>
#one = affine_map<(d0) -> (d0)>
#scalar = affine_map<(d0) -> ()>
func.func @two_reductions(%x: tensor<4x8xf32>) -> tensor<f32> {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<4x8xf32>
  %exp = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%x : tensor<4x8xf32>) outs(%e : tensor<4x8xf32>) {
  ^bb0(%i: f32, %o: f32):
    %v = math.exp %i : f32
    linalg.yield %v : f32
  } -> tensor<4x8xf32>
  %e1 = tensor.empty() : tensor<4xf32>
  %f1 = linalg.fill ins(%zero : f32) outs(%e1 : tensor<4xf32>) -> tensor<4xf32>
  %rows = linalg.generic {indexing_maps = [#id, #col], iterator_types = ["parallel", "reduction"]}
      ins(%exp : tensor<4x8xf32>) outs(%f1 : tensor<4xf32>) {
  ^bb0(%i: f32, %o: f32):
    %v = arith.addf %i, %o : f32
    linalg.yield %v : f32
  } -> tensor<4xf32>
  %e0 = tensor.empty() : tensor<f32>
  %f0 = linalg.fill ins(%zero : f32) outs(%e0 : tensor<f32>) -> tensor<f32>
  %all = linalg.generic {indexing_maps = [#one, #scalar], iterator_types = ["reduction"]}
      ins(%rows : tensor<4xf32>) outs(%f0 : tensor<f32>) {
  ^bb0(%i: f32, %o: f32):
    %v = arith.addf %i, %o : f32
    linalg.yield %v : f32
  } -> tensor<f32>
  return %all : tensor<f32>
}

// A Linear on a 3-d input: 2-d GEMM + bias, a view back to 3-d, then a residual add.
// The reshape joins the group, and after lowering the bias add and the residual add
// are ONE loop nest over 8x16x32 reading the GEMM's expanded result.
// CHECK-LABEL: func.func @linear_3d_residual
// CHECK: "ember_fusion.group"() ({
// CHECK:   linalg.matmul
// CHECK:   linalg.generic
// CHECK:   tensor.expand_shape
// CHECK:   linalg.generic
// CHECK:   "ember_fusion.yield"
// CHECK: }) {kind = "matmul_epilogue"
// CHECK-NOT: ember_fusion.group
// CHECK: return

// LOWER-LABEL: func.func @linear_3d_residual
// LOWER: %[[MM:.*]] = linalg.matmul
// LOWER: %[[E:.*]] = tensor.expand_shape %[[MM]]
// LOWER: linalg.generic {{.*}} ins(%[[E]], %{{.*}}, %{{.*}} : tensor<8x16x32xf32>, tensor<32xf32>, tensor<8x16x32xf32>)
// LOWER: arith.addf
// LOWER: arith.addf
// LOWER-NOT: linalg.generic
// LOWER: return
#id3 = affine_map<(d0, d1, d2) -> (d0, d1, d2)>
func.func @linear_3d_residual(%x: tensor<128x64xf32>, %w: tensor<64x32xf32>, %b: tensor<32xf32>,
                              %res: tensor<8x16x32xf32>) -> tensor<8x16x32xf32> {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<128x32xf32>
  %f = linalg.fill ins(%zero : f32) outs(%e : tensor<128x32xf32>) -> tensor<128x32xf32>
  %mm = linalg.matmul ins(%x, %w : tensor<128x64xf32>, tensor<64x32xf32>) outs(%f : tensor<128x32xf32>) -> tensor<128x32xf32>
  %add = linalg.generic {indexing_maps = [#id, #row, #id], iterator_types = ["parallel", "parallel"]}
      ins(%mm, %b : tensor<128x32xf32>, tensor<32xf32>) outs(%e : tensor<128x32xf32>) {
  ^bb0(%i: f32, %j: f32, %o: f32):
    %s = arith.addf %i, %j : f32
    linalg.yield %s : f32
  } -> tensor<128x32xf32>
  %v = tensor.expand_shape %add [[0, 1], [2]] output_shape [8, 16, 32] : tensor<128x32xf32> into tensor<8x16x32xf32>
  %e3 = tensor.empty() : tensor<8x16x32xf32>
  %y = linalg.generic {indexing_maps = [#id3, #id3, #id3], iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%v, %res : tensor<8x16x32xf32>, tensor<8x16x32xf32>) outs(%e3 : tensor<8x16x32xf32>) {
  ^bb0(%i: f32, %r: f32, %o: f32):
    %s = arith.addf %i, %r : f32
    linalg.yield %s : f32
  } -> tensor<8x16x32xf32>
  return %y : tensor<8x16x32xf32>
}

// An inference batch norm: 1/sqrt(var + eps) is computed from arguments alone, over C,
// and broadcast over N*H*W. It stays a loop nest of its own (once per channel) instead
// of being fused into the big loop, where it would be redone for every element.
// LOWER-LABEL: func.func @batch_norm_scale_per_channel
// LOWER: linalg.generic {{.*}} iterator_types = ["parallel"]}
// LOWER: math.sqrt
// LOWER: arith.divf
// LOWER: linalg.generic {{.*}} iterator_types = ["parallel", "parallel"]}
// LOWER-NOT: math.sqrt
// LOWER: arith.mulf
// LOWER: return
func.func @batch_norm_scale_per_channel(%x: tensor<64x32xf32>, %var: tensor<32xf32>) -> tensor<64x32xf32> {
  %one = arith.constant 1.0 : f32
  %eps = arith.constant 1.0e-5 : f32
  %ec = tensor.empty() : tensor<32xf32>
  %inv = linalg.generic {indexing_maps = [affine_map<(d0) -> (d0)>, affine_map<(d0) -> (d0)>], iterator_types = ["parallel"]}
      ins(%var : tensor<32xf32>) outs(%ec : tensor<32xf32>) {
  ^bb0(%v: f32, %o: f32):
    %a = arith.addf %v, %eps : f32
    %s = math.sqrt %a : f32
    %r = arith.divf %one, %s : f32
    linalg.yield %r : f32
  } -> tensor<32xf32>
  %e = tensor.empty() : tensor<64x32xf32>
  %y = linalg.generic {indexing_maps = [#id, #row, #id], iterator_types = ["parallel", "parallel"]}
      ins(%x, %inv : tensor<64x32xf32>, tensor<32xf32>) outs(%e : tensor<64x32xf32>) {
  ^bb0(%i: f32, %j: f32, %o: f32):
    %m = arith.mulf %i, %j : f32
    linalg.yield %m : f32
  } -> tensor<64x32xf32>
  return %y : tensor<64x32xf32>
}
