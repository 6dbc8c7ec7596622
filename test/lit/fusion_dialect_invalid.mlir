// RUN: not ember-opt %s 2>&1 | filecheck %s
// IRDL: the results of one group share a type.

// CHECK: error
// CHECK: expected 'tensor<4xf32>' but got 'tensor<8xf32>'
func.func @mixed(%a: tensor<4xf32>, %b: tensor<8xf32>) {
  %0:2 = "ember_fusion.group"() ({
    "ember_fusion.yield"(%a, %b) : (tensor<4xf32>, tensor<8xf32>) -> ()
  }) : () -> (tensor<4xf32>, tensor<8xf32>)
  return
}
