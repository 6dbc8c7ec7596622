// RUN: ember-opt %s --ember-zero-size-arguments | filecheck %s

// An unused argument with a zero-size inner dim becomes tensor<0xf32> (a shape the
// bare-pointer calling convention takes); a leading zero, a used argument and the other
// arguments keep their types.
// CHECK-LABEL: func.func @forward
// CHECK-SAME: (%{{.*}}: tensor<0xf32>, %{{.*}}: tensor<0x5xf32>, %{{.*}}: tensor<2x0x3xf32>, %{{.*}}: tensor<3xf32>)
func.func @forward(%arg0: tensor<5x0xf32>, %arg1: tensor<0x5xf32>, %arg2: tensor<2x0x3xf32>, %arg3: tensor<3xf32>) -> (tensor<3xf32>, tensor<2x0x3xf32>) {
  return %arg3, %arg2 : tensor<3xf32>, tensor<2x0x3xf32>
}
