// After torch-mlir's lowering: the declarations on builtin tensors, called from @forward.
func.func private @ember_lib_lgamma_0(tensor<20xf32>) -> tensor<20xf32>
func.func private @ember_lib_copysign_1(tensor<3x1xf32>, tensor<4xf32>) -> tensor<3x4xf32>
func.func private @ember_lib_fmod_2(tensor<?x1xf64>, tensor<5xf64>) -> tensor<?x5xf64>
func.func @forward(%arg0: tensor<20xf32>, %a: tensor<3x1xf32>, %b: tensor<4xf32>, %c: tensor<?x1xf64>, %d: tensor<5xf64>) -> (tensor<20xf32>, tensor<3x4xf32>, tensor<?x5xf64>) {
  %0 = call @ember_lib_lgamma_0(%arg0) : (tensor<20xf32>) -> tensor<20xf32>
  %1 = call @ember_lib_copysign_1(%a, %b) : (tensor<3x1xf32>, tensor<4xf32>) -> tensor<3x4xf32>
  %2 = call @ember_lib_fmod_2(%c, %d) : (tensor<?x1xf64>, tensor<5xf64>) -> tensor<?x5xf64>
  return %0, %1, %2 : tensor<20xf32>, tensor<3x4xf32>, tensor<?x5xf64>
}
