// RUN: ember-opt %s | filecheck %s
// RUN: ember-opt %s | ember-opt | filecheck %s

// CHECK-LABEL: func.func @group
// CHECK: %[[R:.*]]:2 = "ember_fusion.group"() ({
// CHECK:   "ember_fusion.yield"(%{{.*}}, %{{.*}}) {{.*}}: (tensor<4xf32>, tensor<4xf32>) -> ()
// CHECK: }) {kind = "elementwise"{{.*}}} : () -> (tensor<4xf32>, tensor<4xf32>)
// CHECK: return %[[R]]#1
func.func @group(%a: tensor<4xf32>) -> tensor<4xf32> {
  %0:2 = "ember_fusion.group"() ({
    "ember_fusion.yield"(%a, %a) : (tensor<4xf32>, tensor<4xf32>) -> ()
  }) {kind = "elementwise"} : () -> (tensor<4xf32>, tensor<4xf32>)
  return %0#1 : tensor<4xf32>
}
