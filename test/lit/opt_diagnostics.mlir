// ember-opt behaves like mlir-opt on bad input: a diagnostic with file:line:col, exit 1,
// never a traceback.
// RUN: not ember-opt %s --ember-matmul-to-blas 2>&1 | filecheck %s --check-prefix=TENSOR
// RUN: not ember-opt %s.missing 2>&1 | filecheck %s --check-prefix=MISSING
// RUN: not ember-opt %S 2>&1 | filecheck %s --check-prefix=DIR
// RUN: not ember-opt %s -o %S/no-such-dir/out.mlir 2>&1 | filecheck %s --check-prefix=OUTPUT
// RUN: not ember-opt %S/Inputs/bad_type.mlir 2>&1 | filecheck %s --check-prefix=LOC

// TENSOR: opt_diagnostics.mlir:12:{{[0-9]+}}: error: 'ember-matmul-to-blas' runs on bufferized IR
// TENSOR-NOT: Traceback
func.func @f(%a: tensor<4x4xf32>, %b: tensor<4x4xf32>, %c: tensor<4x4xf32>) -> tensor<4x4xf32> {
  %0 = linalg.matmul ins(%a, %b : tensor<4x4xf32>, tensor<4x4xf32>) outs(%c : tensor<4x4xf32>) -> tensor<4x4xf32>
  return %0 : tensor<4x4xf32>
}

// MISSING: ember-opt: error: could not open input file '{{.*}}.missing': No such file or directory
// DIR: ember-opt: error: could not open input file '{{.*}}': Is a directory
// OUTPUT: ember-opt: error: could not open output file '{{.*}}out.mlir'
// LOC: bad_type.mlir:3:10: use of value '%a' expects different type
