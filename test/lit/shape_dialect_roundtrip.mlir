// RUN: ember-opt %s | ember-opt | filecheck %s
// The ember_shape dialect parses, verifies and prints back unchanged.

// CHECK-LABEL: func.func @bound
// CHECK: %[[S0:.*]] = "ember_shape.symbol"() {divisor = 8 : i64, max = 4096 : i64, min = 2 : i64, name = "s77"} : () -> index
// CHECK: %[[S1:.*]] = "ember_shape.symbol"() {divisor = 1 : i64, max = 9223372036854775807 : i64, min = 1 : i64, name = "s27"} : () -> index
// CHECK: "ember_shape.bind"(%arg0, %[[S0]]) {shape = #{{.*}}} : (tensor<?x4xf32>, index) -> ()
// CHECK: "ember_shape.bind"(%arg1, %[[S0]], %[[S1]]) {shape = #{{.*}}} : (tensor<?x?xf32>, index, index) -> ()
func.func @bound(%a: tensor<?x4xf32>, %b: tensor<?x?xf32>) {
  %s = "ember_shape.symbol"() {name = "s77", min = 2 : i64, max = 4096 : i64, divisor = 8 : i64} : () -> index
  %t = "ember_shape.symbol"() {name = "s27", min = 1 : i64, max = 9223372036854775807 : i64, divisor = 1 : i64} : () -> index
  "ember_shape.bind"(%a, %s) {shape = affine_map<()[s0] -> (s0, 4)>} : (tensor<?x4xf32>, index) -> ()
  "ember_shape.bind"(%b, %s, %t) {shape = affine_map<()[s0, s1] -> (s0 * s1, s1 + 1)>} : (tensor<?x?xf32>, index, index) -> ()
  return
}
