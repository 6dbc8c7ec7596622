// RUN: ember-opt %s --pass-pipeline='builtin.module(ember-form-fusion-groups,ember-lower-fusion-groups,one-shot-bufferize{bufferize-function-boundaries function-boundary-type-conversion=identity-layout-map},buffer-results-to-out-params{hoist-static-allocs=true modify-public-functions=true})' | filecheck %s

// Outputs become trailing out-params that the runtime allocates with torch.
// CHECK-LABEL: func.func @f(%arg0: memref<4xf32>, %arg1: memref<4xf32>)
// CHECK-NOT: memref.alloc
// CHECK: linalg.generic
// CHECK-NOT: linalg.generic
#m = affine_map<(d0) -> (d0)>
func.func @f(%x: tensor<4xf32>) -> tensor<4xf32> {
  %e = tensor.empty() : tensor<4xf32>
  %a = linalg.generic {indexing_maps = [#m, #m], iterator_types = ["parallel"]} ins(%x : tensor<4xf32>) outs(%e : tensor<4xf32>) {
  ^bb0(%i: f32, %o: f32):
    %v = math.exp %i : f32
    linalg.yield %v : f32
  } -> tensor<4xf32>
  %b = linalg.generic {indexing_maps = [#m, #m], iterator_types = ["parallel"]} ins(%a : tensor<4xf32>) outs(%e : tensor<4xf32>) {
  ^bb0(%i: f32, %o: f32):
    %v = arith.addf %i, %i : f32
    linalg.yield %v : f32
  } -> tensor<4xf32>
  return %b : tensor<4xf32>
}
