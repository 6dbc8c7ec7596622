// RUN: not ember-opt --split-input-file %s 2>&1 | filecheck %s
// The verifiers of ember_shape ops.

// CHECK: shape has 1 results for a rank-2 value
func.func @rank(%a: tensor<?x4xf32>) {
  %s = "ember_shape.symbol"() {name = "s0", min = 2 : i64, max = 9 : i64, divisor = 1 : i64} : () -> index
  "ember_shape.bind"(%a, %s) {shape = affine_map<()[s0] -> (s0)>} : (tensor<?x4xf32>, index) -> ()
  return
}

// -----

// CHECK: static dim 1 of size 4 is bound to s0
func.func @static(%a: tensor<?x4xf32>) {
  %s = "ember_shape.symbol"() {name = "s0", min = 2 : i64, max = 9 : i64, divisor = 1 : i64} : () -> index
  "ember_shape.bind"(%a, %s) {shape = affine_map<()[s0] -> (s0, s0)>} : (tensor<?x4xf32>, index) -> ()
  return
}

// -----

// CHECK: symbol range [5, 2] is empty or negative
func.func @range() {
  %s = "ember_shape.symbol"() {name = "s0", min = 5 : i64, max = 2 : i64, divisor = 1 : i64} : () -> index
  return
}

// -----

// CHECK: symbol divisor must be >= 1, got 0
func.func @divisor() {
  %s = "ember_shape.symbol"() {name = "s0", min = 0 : i64, max = 2 : i64, divisor = 0 : i64} : () -> index
  return
}
