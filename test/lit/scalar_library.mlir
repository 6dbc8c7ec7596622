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

// The declarations get loop bodies (lgamma in double precision through the C library,
// copysign as math.copysign with broadcast maps), inlined into the caller.
// BODY: func.func private @lgamma(f64) -> f64
// BODY-LABEL: func.func @forward
// BODY: linalg.generic
// BODY: arith.extf %{{.*}} : f32 to f64
// BODY: call @lgamma(%{{.*}}) : (f64) -> f64
// BODY: arith.truncf
// BODY: linalg.generic
// BODY: math.copysign
// BODY-NOT: ember_lib
