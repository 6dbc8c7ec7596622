// RUN: ember-opt %s --ember-asserts-to-error-code | filecheck %s

// A run-time check inside a kernel body stores its code into a global instead of
// aborting; the module records the message for the runtime.
// CHECK: module attributes {ember.error_messages = ["index must be smaller than dim size"]}
// CHECK: memref.global @ember_error_code : memref<i32> = dense<0>
// CHECK-LABEL: func.func @gather
// CHECK-NOT: cf.assert
// CHECK: %[[BAD:.*]] = arith.xori %{{.*}}, %true
// CHECK: scf.if %[[BAD]]
// CHECK: %[[G:.*]] = memref.get_global @ember_error_code : memref<i32>
// CHECK: memref.store %c1_i32, %[[G]][] : memref<i32>
// CHECK: tensor.extract
#id = affine_map<(d0) -> (d0)>
func.func @gather(%x: tensor<4xf32>, %i: tensor<2xi64>) -> tensor<2xf32> {
  %c4 = arith.constant 4 : index
  %e = tensor.empty() : tensor<2xf32>
  %r = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel"]}
      ins(%i : tensor<2xi64>) outs(%e : tensor<2xf32>) {
  ^bb0(%in: i64, %out: f32):
    %k = arith.index_cast %in : i64 to index
    %ok = arith.cmpi slt, %k, %c4 : index
    cf.assert %ok, "index must be smaller than dim size"
    %v = tensor.extract %x[%k] : tensor<4xf32>
    linalg.yield %v : f32
  } -> tensor<2xf32>
  return %r : tensor<2xf32>
}
