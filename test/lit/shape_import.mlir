// RUN: ember-opt %s --ember-shape-import | filecheck %s
// torch-mlir's symbolic-shape ops -> ember_shape symbols and shape attributes over all
// symbols of the function (here [s77, s27]; the bind of %arg1 names them the other way).

// CHECK: #[[ID:.*]] = affine_map<()[s0, s1] -> (s0, s1)>
// CHECK-LABEL: func.func @forward
// CHECK-SAME: %arg0: !torch.vtensor<[?,?],f32> {ember_shape.shape = #[[ID]]}
// CHECK-SAME: %arg1: !torch.vtensor<[?,8],f32> {ember_shape.shape = affine_map<()[s0, s1] -> (s1 * 2, 8)>}
// CHECK-SAME: ember_shape.result_shapes = [#[[ID]]]
// CHECK-SAME: ember_shape.symbols = ["s77", "s27"]
// CHECK: "ember_shape.symbol"() {divisor = 8 : i64, max = 4096 : i64, min = 2 : i64, name = "s77"}
// CHECK: "ember_shape.symbol"() {divisor = 1 : i64, max = 9223372036854775807 : i64, min = 2 : i64, name = "s27"}
// CHECK-NOT: torch.symbolic_int
// CHECK-NOT: torch.bind_symbolic_shape
// CHECK: torch.aten.relu
func.func @forward(%arg0: !torch.vtensor<[?,?],f32>, %arg1: !torch.vtensor<[?,8],f32>) -> !torch.vtensor<[?,?],f32> attributes {ember_shape.divisors = {s77 = 8 : i64}} {
  %0 = torch.symbolic_int "s77" {min_val = 2, max_val = 4096} : !torch.int
  %1 = torch.symbolic_int "s27" {min_val = 2, max_val = 9223372036854775807} : !torch.int
  torch.bind_symbolic_shape %arg0, [%0, %1], affine_map<()[s0, s1] -> (s0, s1)> : !torch.vtensor<[?,?],f32>
  torch.bind_symbolic_shape %arg1, [%1], affine_map<()[s0] -> (s0 * 2, 8)> : !torch.vtensor<[?,8],f32>
  %2 = torch.aten.relu %arg0 : !torch.vtensor<[?,?],f32> -> !torch.vtensor<[?,?],f32>
  torch.bind_symbolic_shape %2, [%1, %0], affine_map<()[s0, s1] -> (s1, s0)> : !torch.vtensor<[?,?],f32>
  return %2 : !torch.vtensor<[?,?],f32>
}
