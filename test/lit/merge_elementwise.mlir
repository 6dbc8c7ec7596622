// RUN: ember-opt %s --ember-merge-elementwise | filecheck %s

#id = affine_map<(d0, d1) -> (d0, d1)>
#tr = affine_map<(d0, d1) -> (d1, d0)>
#sc = affine_map<(d0, d1) -> ()>
#z = affine_map<() -> ()>

// A producer that is also returned merges into its consumer; both values come out of
// one loop nest (an optimizer's updated moment and the parameter it updates).
// CHECK-LABEL: func.func @multi_use_producer
// CHECK: %[[M:.*]]:2 = linalg.generic {{.*}} ins(%arg0, %arg1 : tensor<4x8xf32>, tensor<4x8xf32>) outs({{.*}}, {{.*}} : tensor<4x8xf32>, tensor<4x8xf32>)
// CHECK: %[[S:.*]] = arith.subf %in, %in_{{.*}}
// CHECK: %[[P:.*]] = arith.mulf %[[S]], %in_{{.*}}
// CHECK: linalg.yield %[[S]], %[[P]]
// CHECK-NOT: linalg.generic
// CHECK: return %[[M]]#1, %[[M]]#0
func.func @multi_use_producer(%x: tensor<4x8xf32>, %y: tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<4x8xf32>) {
  %e0 = tensor.empty() : tensor<4x8xf32>
  %a = linalg.generic {indexing_maps = [#id, #id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%x, %y : tensor<4x8xf32>, tensor<4x8xf32>) outs(%e0 : tensor<4x8xf32>) {
  ^bb0(%i: f32, %j: f32, %o: f32):
    %s = arith.subf %i, %j : f32
    linalg.yield %s : f32
  } -> tensor<4x8xf32>
  %e1 = tensor.empty() : tensor<4x8xf32>
  %b = linalg.generic {indexing_maps = [#id, #id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%a, %y : tensor<4x8xf32>, tensor<4x8xf32>) outs(%e1 : tensor<4x8xf32>) {
  ^bb0(%i: f32, %j: f32, %o: f32):
    %p = arith.mulf %i, %j : f32
    linalg.yield %p : f32
  } -> tensor<4x8xf32>
  return %b, %a : tensor<4x8xf32>, tensor<4x8xf32>
}

// A diamond (GELU's x * cdf(x)): the producer read twice is merged and not stored.
// CHECK-LABEL: func.func @diamond
// CHECK: linalg.generic {{.*}} ins(%arg0 : tensor<4x8xf32>) outs({{.*}} : tensor<4x8xf32>)
// CHECK: math.exp
// CHECK: arith.mulf
// CHECK-NOT: linalg.generic
func.func @diamond(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %e0 = tensor.empty() : tensor<4x8xf32>
  %a = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%x : tensor<4x8xf32>) outs(%e0 : tensor<4x8xf32>) {
  ^bb0(%i: f32, %o: f32):
    %s = math.exp %i : f32
    linalg.yield %s : f32
  } -> tensor<4x8xf32>
  %e1 = tensor.empty() : tensor<4x8xf32>
  %b = linalg.generic {indexing_maps = [#id, #id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%a, %a : tensor<4x8xf32>, tensor<4x8xf32>) outs(%e1 : tensor<4x8xf32>) {
  ^bb0(%i: f32, %j: f32, %o: f32):
    %p = arith.mulf %i, %j : f32
    linalg.yield %p : f32
  } -> tensor<4x8xf32>
  return %b : tensor<4x8xf32>
}

// Siblings reading one tensor: one loop nest reads it once and writes both results.
// CHECK-LABEL: func.func @siblings
// CHECK: %[[M:.*]]:2 = linalg.generic {{.*}} ins(%arg0 : tensor<4x8xf32>)
// CHECK-NOT: linalg.generic
// CHECK: return %[[M]]#0, %[[M]]#1
func.func @siblings(%x: tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<4x8xf32>) {
  %e0 = tensor.empty() : tensor<4x8xf32>
  %a = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%x : tensor<4x8xf32>) outs(%e0 : tensor<4x8xf32>) {
  ^bb0(%i: f32, %o: f32):
    %s = math.exp %i : f32
    linalg.yield %s : f32
  } -> tensor<4x8xf32>
  %e1 = tensor.empty() : tensor<4x8xf32>
  %b = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%x : tensor<4x8xf32>) outs(%e1 : tensor<4x8xf32>) {
  ^bb0(%i: f32, %o: f32):
    %p = math.log %i : f32
    linalg.yield %p : f32
  } -> tensor<4x8xf32>
  return %a, %b : tensor<4x8xf32>, tensor<4x8xf32>
}

// The consumer reads the producer transposed: element (i, j) needs the producer's
// (j, i), which one loop nest cannot have yet. Not merged.
// CHECK-LABEL: func.func @transposed_read
// CHECK-COUNT-2: linalg.generic
func.func @transposed_read(%x: tensor<8x8xf32>) -> (tensor<8x8xf32>, tensor<8x8xf32>) {
  %e0 = tensor.empty() : tensor<8x8xf32>
  %a = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%x : tensor<8x8xf32>) outs(%e0 : tensor<8x8xf32>) {
  ^bb0(%i: f32, %o: f32):
    %s = math.exp %i : f32
    linalg.yield %s : f32
  } -> tensor<8x8xf32>
  %e1 = tensor.empty() : tensor<8x8xf32>
  %b = linalg.generic {indexing_maps = [#tr, #id], iterator_types = ["parallel", "parallel"]}
      ins(%a : tensor<8x8xf32>) outs(%e1 : tensor<8x8xf32>) {
  ^bb0(%i: f32, %o: f32):
    %p = math.log %i : f32
    linalg.yield %p : f32
  } -> tensor<8x8xf32>
  return %a, %b : tensor<8x8xf32>, tensor<8x8xf32>
}

// Another use of the producer lies between the two (a matmul reading it, whose result
// the consumer needs): merging would make a cycle. Not merged.
// CHECK-LABEL: func.func @use_in_between
// CHECK: linalg.generic
// CHECK: linalg.matmul
// CHECK: linalg.generic
func.func @use_in_between(%x: tensor<8x8xf32>) -> tensor<8x8xf32> {
  %e0 = tensor.empty() : tensor<8x8xf32>
  %a = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%x : tensor<8x8xf32>) outs(%e0 : tensor<8x8xf32>) {
  ^bb0(%i: f32, %o: f32):
    %s = math.exp %i : f32
    linalg.yield %s : f32
  } -> tensor<8x8xf32>
  %c0 = arith.constant 0.0 : f32
  %e2 = tensor.empty() : tensor<8x8xf32>
  %z = linalg.fill ins(%c0 : f32) outs(%e2 : tensor<8x8xf32>) -> tensor<8x8xf32>
  %mm = linalg.matmul ins(%a, %a : tensor<8x8xf32>, tensor<8x8xf32>) outs(%z : tensor<8x8xf32>) -> tensor<8x8xf32>
  %e1 = tensor.empty() : tensor<8x8xf32>
  %b = linalg.generic {indexing_maps = [#id, #id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%a, %mm : tensor<8x8xf32>, tensor<8x8xf32>) outs(%e1 : tensor<8x8xf32>) {
  ^bb0(%i: f32, %j: f32, %o: f32):
    %p = arith.addf %i, %j : f32
    linalg.yield %p : f32
  } -> tensor<8x8xf32>
  return %b : tensor<8x8xf32>
}

// Tiny independent loop nests (0-d optimizer step counters) become one, placed at the
// first: the second's operands are all there already.
// CHECK-LABEL: func.func @tiny
// CHECK: %[[T:.*]]:2 = linalg.generic {indexing_maps = [#{{.*}}, #{{.*}}, #{{.*}}, #{{.*}}], iterator_types = []} ins(%arg0, %arg1 : tensor<f32>, tensor<f32>)
// CHECK: linalg.generic {{.*}} ins(%arg2, %[[T]]#0
// CHECK: linalg.generic {{.*}} ins(%arg3, %[[T]]#1
func.func @tiny(%s0: tensor<f32>, %s1: tensor<f32>, %p0: tensor<4x8xf32>, %p1: tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<4x8xf32>) {
  %c1 = arith.constant 1.0 : f32
  %e0 = tensor.empty() : tensor<f32>
  %t0 = linalg.generic {indexing_maps = [#z, #z], iterator_types = []}
      ins(%s0 : tensor<f32>) outs(%e0 : tensor<f32>) {
  ^bb0(%i: f32, %o: f32):
    %s = arith.addf %i, %c1 : f32
    linalg.yield %s : f32
  } -> tensor<f32>
  %e1 = tensor.empty() : tensor<4x8xf32>
  %u0 = linalg.generic {indexing_maps = [#id, #sc, #id], iterator_types = ["parallel", "parallel"]}
      ins(%p0, %t0 : tensor<4x8xf32>, tensor<f32>) outs(%e1 : tensor<4x8xf32>) {
  ^bb0(%i: f32, %j: f32, %o: f32):
    %p = arith.mulf %i, %j : f32
    linalg.yield %p : f32
  } -> tensor<4x8xf32>
  %e2 = tensor.empty() : tensor<f32>
  %t1 = linalg.generic {indexing_maps = [#z, #z], iterator_types = []}
      ins(%s1 : tensor<f32>) outs(%e2 : tensor<f32>) {
  ^bb0(%i: f32, %o: f32):
    %s = arith.addf %i, %c1 : f32
    linalg.yield %s : f32
  } -> tensor<f32>
  %e3 = tensor.empty() : tensor<4x8xf32>
  %u1 = linalg.generic {indexing_maps = [#id, #sc, #id], iterator_types = ["parallel", "parallel"]}
      ins(%p1, %t1 : tensor<4x8xf32>, tensor<f32>) outs(%e3 : tensor<4x8xf32>) {
  ^bb0(%i: f32, %j: f32, %o: f32):
    %p = arith.mulf %i, %j : f32
    linalg.yield %p : f32
  } -> tensor<4x8xf32>
  return %u0, %u1 : tensor<4x8xf32>, tensor<4x8xf32>
}
