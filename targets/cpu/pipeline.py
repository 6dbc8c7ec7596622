"""The CPU lowering: linalg-on-tensors (after fusion) -> LLVM dialect."""
from ember.compiler.passes import register_python_pass
from ember.compiler.pipeline import run_pipeline
from . import (blas, distinct_results, math_approx, memref_copy, parallel, parallel_access,
               reassociate, reduction_rows, run_time_checks, shape_arguments, workspace)

# (name, pass, description, what it needs of its input: on tensor IR the bufferized-IR
# passes would find nothing to do, so ember-opt reports that instead of a silent no-op)
_CPU_PASSES = [
    (reduction_rows.PASS_NAME, reduction_rows.fuse_reduction_rows,
     "layer norm / softmax chains -> one scf.forall over rows (tile and fuse)", None),
    (reduction_rows.SCRATCH_PASS_NAME, reduction_rows.loop_scratch_on_stack,
     "small per-iteration allocs in loops -> entry-block allocas (after outlining)",
     "bufferized"),
    (blas.PASS_NAME, blas.matmul_to_blas,
     "f32 linalg.matmul/batch_matmul on memrefs -> host BLAS sgemm call", "bufferized"),
    (reassociate.PASS_NAME, reassociate.reassociate_reductions,
     "mark linalg reduction combiners reassoc so LLVM vectorizes them", None),
    (memref_copy.PASS_NAME, memref_copy.memref_copy_to_linalg,
     "memref.copy -> linalg.copy (loops instead of a runtime call)", "bufferized"),
    (workspace.PASS_NAME, workspace.plan_workspace,
     "entry-function temporaries -> views of one workspace argument", "bufferized"),
    (parallel.OUTLINE_PASS_NAME, parallel.outline_parallel_loops,
     "big top-level scf.parallel loops -> per-thread kernels + launch calls", "bufferized"),
    (parallel.LAUNCHERS_PASS_NAME, parallel.emit_parallel_launchers,
     "define the launchers of outlined kernels with GOMP_parallel (LLVM dialect)",
     "bufferized"),
    (parallel_access.MARK_PASS_NAME, parallel_access.mark_parallel_loops,
     "innermost scf.parallel -> scf.for nest annotated as a parallel loop for LLVM",
     "bufferized"),
    (parallel_access.GROUPS_PASS_NAME, parallel_access.parallel_access_groups,
     "loads/stores of an annotated loop join its access group (LLVM dialect)", None),
    (distinct_results.PASS_NAME, distinct_results.distinct_results,
     "copy a returned buffer that is returned twice or is an argument (out-params)",
     "bufferized"),
    (shape_arguments.PASS_NAME, shape_arguments.shape_to_arguments,
     "ember_shape symbols -> size arguments; dynamic buffers -> bare pointers re-viewed",
     "bufferized"),
    (run_time_checks.PASS_NAME, run_time_checks.asserts_to_error_code,
     "cf.assert -> an error code the runtime raises (no abort of the process)", None),
    (math_approx.PASS_NAME, math_approx.approximate_math,
     "f32 math.exp/erf/tanh -> arith polynomials (vectorizable, no libm call)", None),
]
for _name, _fn, _description, _requires in _CPU_PASSES:
    register_python_pass(_name, _fn, _description, _requires)

BUFFERIZE = [
    reduction_rows.PASS_NAME,
    run_time_checks.PASS_NAME,
    reassociate.PASS_NAME,
    "ember-zero-size-arguments",  # unused (5, 0) inputs: a shape bare pointers take
    "ember-read-only-arguments",  # the caller's tensors: copy before writing, never in place
    "one-shot-bufferize{bufferize-function-boundaries function-boundary-type-conversion=identity-layout-map}",
    # The runtime allocates outputs with torch: results become trailing out-params.
    distinct_results.PASS_NAME,
    "buffer-results-to-out-params{hoist-static-allocs=true modify-public-functions=true}",
    # Dynamic shapes: sizes become arguments, every buffer stays a bare pointer.
    shape_arguments.PASS_NAME,
    "canonicalize",
    "buffer-deallocation-pipeline",
    # Where buffer aliasing is only known at run time the deallocation pipeline calls a
    # generated `dealloc_helper` on dynamic memrefs, which the bare-pointer ABI cannot
    # take: inline it.
    "inline",
    workspace.PASS_NAME,  # after deallocation: a dealloc marks where a buffer dies
]

TO_LLVM = [
    blas.PASS_NAME,
    memref_copy.PASS_NAME,
    "scf-forall-to-parallel",
    # Plain loops with static bounds: LLVM's vectorizer (O3, host CPU) widens them; the
    # big ones are split across torch's OpenMP threads.
    "func.func(convert-linalg-to-parallel-loops)",
    parallel.OUTLINE_PASS_NAME,
    reduction_rows.SCRATCH_PASS_NAME,
    # Independent iterations, said so to LLVM: vectorized without run-time alias checks.
    parallel_access.MARK_PASS_NAME,
    "lower-affine",
    "convert-scf-to-cf",
    "expand-strided-metadata",
    "lower-affine",
    math_approx.PASS_NAME,
    # Every expansion but powf's, which is exp(y * log(x)): NaN for a negative base where
    # eager's pow(-2, 3) is -8; llvm.intr.pow (the C library's powf) keeps the semantics.
    "func.func(math-expand-ops{ops=ctlz,tan,sinh,cosh,asinh,acosh,atanh,tanh,fma,ceil,exp2,"
    "fpowi,round,roundeven,rsqrt})",
    "finalize-memref-to-llvm",
    "convert-math-to-llvm",
    "convert-math-to-libm",
    "convert-arith-to-llvm",
    "convert-index-to-llvm",
    # Static shapes + identity layouts: a bare pointer per tensor is the whole ABI.
    "convert-func-to-llvm{use-bare-ptr-memref-call-conv=true}",
    parallel.LAUNCHERS_PASS_NAME,
    "convert-cf-to-llvm",
    parallel_access.GROUPS_PASS_NAME,
    "reconcile-unrealized-casts",
]

CPU_LOWERING = BUFFERIZE + TO_LLVM


def lower_to_llvm(module, *, print_ir_after_all=False):
    return run_pipeline(module, CPU_LOWERING, print_ir_after_all=print_ir_after_all,
                        stage="cpu-lowering")
