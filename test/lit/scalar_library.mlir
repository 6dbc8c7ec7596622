// RUN: ember-opt %s --split-input-file --ember-call-scalar-library | filecheck %s --check-prefix=CALL
// RUN: ember-opt %S/Inputs/scalar_library_decls.mlir --ember-define-scalar-library --inline --symbol-dce | filecheck %s --check-prefix=BODY

// A torch.operator torch-mlir cannot lower becomes a call of a declared function.
// CALL-LABEL: func.func private @ember_lib_lgamma_0(!torch.vtensor<[20],f32>) -> !torch.vtensor<[20],f32>
// CALL: func.func @forward
// CALL-NOT: torch.operator
// CALL: call @ember_lib_lgamma_0(%arg0)
func.func @forward(%arg0: !torch.vtensor<[20],f32>) -> !torch.vtensor<[20],f32> {
  %0 = torch.operator "torch.aten.lgamma"(%arg0) : (!torch.vtensor<[20],f32>) -> !torch.vtensor<[20],f32>
  return %0 : !torch.vtensor<[20],f32>
}

// -----

// An integer operand is not a float library call: left for the fallback.
// CALL-LABEL: func.func @ints
// CALL: torch.operator "torch.aten.lgamma"
func.func @ints(%arg0: !torch.vtensor<[4],si64>) -> !torch.vtensor<[4],f32> {
  %0 = torch.operator "torch.aten.lgamma"(%arg0) : (!torch.vtensor<[4],si64>) -> !torch.vtensor<[4],f32>
  return %0 : !torch.vtensor<[4],f32>
}

// -----

// fmod is called too, on dynamic sizes as well.
// CALL-LABEL: func.func private @ember_lib_fmod_0(!torch.vtensor<[?,4],f32>, !torch.vtensor<[4],f32>) -> !torch.vtensor<[?,4],f32>
// CALL: call @ember_lib_fmod_0(%arg0, %arg1)
func.func @fmod(%arg0: !torch.vtensor<[?,4],f32>, %arg1: !torch.vtensor<[4],f32>) -> !torch.vtensor<[?,4],f32> {
  %0 = torch.aten.fmod.Tensor %arg0, %arg1 : !torch.vtensor<[?,4],f32>, !torch.vtensor<[4],f32> -> !torch.vtensor<[?,4],f32>
  return %0 : !torch.vtensor<[?,4],f32>
}

// The declarations get loop bodies (lgamma in double precision through the C library,
// copysign as math.copysign with broadcast maps, fmod as arith.remf with its dynamic
// size read from the operand), inlined into the caller.
// BODY: func.func private @lgamma(f64) -> f64
// BODY-LABEL: func.func @forward
// BODY: %[[C0:.*]] = arith.constant 0 : index
// BODY: linalg.generic
// BODY: arith.extf %{{.*}} : f32 to f64
// BODY: call @lgamma(%{{.*}}) : (f64) -> f64
// BODY: arith.truncf
// BODY: linalg.generic
// BODY: math.copysign
// BODY: %[[D0:.*]] = tensor.dim %{{.*}}, %[[C0]] : tensor<?x1xf64>
// BODY: tensor.empty(%[[D0]]) : tensor<?x5xf64>
// BODY: linalg.generic
// BODY: arith.remf %{{.*}}, %{{.*}} : f64
// BODY-NOT: ember_lib
