// RUN: ember-opt %s --ember-shape-resolve-dims --cse --canonicalize | filecheck %s
// Sizes read from bound tensors become the symbols: the shape check between two dims
// that are one symbol folds away, and an int argument that is a size reads the symbol.

// CHECK-LABEL: func.func @forward
// CHECK: %[[S0:.*]] = "ember_shape.symbol"() {{.*}}name = "s0"
// CHECK: %[[S1:.*]] = "ember_shape.symbol"() {{.*}}name = "s1"
// CHECK-NOT: tensor.dim
// CHECK-NOT: cf.assert
// CHECK: %[[N:.*]] = arith.index_cast %[[S0]] : index to i64
// CHECK: %[[TWICE:.*]] = affine.apply #{{.*}}()[%[[S1]]]
// CHECK: %[[E:.*]] = tensor.empty(%[[S0]], %[[TWICE]]) : tensor<?x?xf32>
// CHECK: return %[[E]], %[[N]]
func.func @forward(%arg0: tensor<?x?xf32> {ember_shape.shape = affine_map<()[s0, s1] -> (s0, s1 * 2)>},
                   %arg1: tensor<?xf32> {ember_shape.shape = affine_map<()[s0, s1] -> (s0)>},
                   %arg2: i64 {ember_shape.shape = affine_map<()[s0, s1] -> (s0)>})
    -> (tensor<?x?xf32>, i64) attributes {ember_shape.symbols = ["s0", "s1"]} {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %s0 = "ember_shape.symbol"() {name = "s0", min = 2 : i64, max = 100 : i64, divisor = 1 : i64} : () -> index
  %s1 = "ember_shape.symbol"() {name = "s1", min = 2 : i64, max = 100 : i64, divisor = 1 : i64} : () -> index
  %d0 = tensor.dim %arg0, %c0 : tensor<?x?xf32>
  %d1 = tensor.dim %arg0, %c1 : tensor<?x?xf32>
  %e0 = tensor.dim %arg1, %c0 : tensor<?xf32>
  %ok = arith.cmpi eq, %d0, %e0 : index
  cf.assert %ok, "mismatched size"
  %empty = tensor.empty(%d0, %d1) : tensor<?x?xf32>
  return %empty, %arg2 : tensor<?x?xf32>, i64
}
