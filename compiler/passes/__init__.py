"""Registry of ember's Python passes and the pipeline aliases built from them."""
from . import (concat_of_slices, fold_transpose_into_matmul, gather_bounds, form_fusion_groups, generalize_data_movement,
               inline_fusion_groups, lower_tm_tensor, merge_elementwise, read_only_arguments, scalar_library, shape_exact_reshapes,
               shape_import, shape_resolve_dims, split_reductions, stable_sort, zero_size_arguments)

# name -> callable(op, pass) run on the top-level module.
PYTHON_PASSES = {
    gather_bounds.PASS_NAME: gather_bounds.check_gather_bounds,
    fold_transpose_into_matmul.PASS_NAME: fold_transpose_into_matmul.fold_transpose_into_matmul,
    form_fusion_groups.PASS_NAME: form_fusion_groups.form_fusion_groups,
    form_fusion_groups.ISOLATE_PASS_NAME: form_fusion_groups.isolate_named_contractions,
    inline_fusion_groups.PASS_NAME: inline_fusion_groups.inline_fusion_groups,
    generalize_data_movement.PASS_NAME: generalize_data_movement.generalize_data_movement,
    split_reductions.PASS_NAME: split_reductions.split_reductions,
    lower_tm_tensor.PASS_NAME: lower_tm_tensor.lower_tm_tensor,
    scalar_library.CALL_PASS_NAME: scalar_library.call_scalar_library,
    scalar_library.DEFINE_PASS_NAME: scalar_library.define_scalar_library,
    stable_sort.PASS_NAME: stable_sort.stable_sort,
    shape_import.PASS_NAME: shape_import.shape_import,
    shape_resolve_dims.PASS_NAME: shape_resolve_dims.shape_resolve_dims,
    shape_exact_reshapes.PASS_NAME: shape_exact_reshapes.shape_exact_reshapes,
    concat_of_slices.PASS_NAME: concat_of_slices.concat_slices_to_gather,
    merge_elementwise.PASS_NAME: merge_elementwise.merge_elementwise,
    read_only_arguments.PASS_NAME: read_only_arguments.mark_arguments_read_only,
    zero_size_arguments.PASS_NAME: zero_size_arguments.flatten_zero_size_arguments,
}

# name -> list of pipeline elements; lets one name stand for a short sequence.
PIPELINE_ALIASES = {
    # Turn each group into one loop nest: fuse its linalg ops (block arguments stop fusion
    # at the group boundary), then dissolve the group.
    "ember-lower-fusion-groups": [
        form_fusion_groups.ISOLATE_PASS_NAME,
        generalize_data_movement.PASS_NAME,
        "func.func(linalg-fuse-elementwise-ops)",
        inline_fusion_groups.PASS_NAME,
    ],
}

PASS_DESCRIPTIONS = {
    gather_bounds.PASS_NAME: "check and clamp data-dependent tensor.extract indices",
    fold_transpose_into_matmul.PASS_NAME: "matmul(A, transpose(B)) -> matmul with a transposed map",
    form_fusion_groups.PASS_NAME: "group linalg ops into ember_fusion.group kernels",
    form_fusion_groups.ISOLATE_PASS_NAME: "nest each named contraction in its own group",
    inline_fusion_groups.PASS_NAME: "dissolve ember_fusion.group ops into their parent",
    generalize_data_movement.PASS_NAME: "tensor linalg.transpose/broadcast/copy -> linalg.generic",
    "ember-lower-fusion-groups": "fuse each group into one loop nest, then dissolve it",
    split_reductions.PASS_NAME: "long float sums -> sums of block sums (eager's accuracy)",
    lower_tm_tensor.PASS_NAME: "tm_tensor scan/scatter/sort on tensors -> scf.for loops",
    scalar_library.CALL_PASS_NAME: "torch.operator lgamma/erfc/bessel/nextafter/copysign -> call",
    scalar_library.DEFINE_PASS_NAME: "ember_lib_* declarations -> linalg loops calling libm",
    stable_sort.PASS_NAME: "torch.operator aten.sort.stable -> torch.aten.sort (ember's is stable)",
    shape_import.PASS_NAME: "torch.symbolic_int/bind_symbolic_shape -> ember_shape symbols "
                            "and argument/result shape attributes",
    shape_resolve_dims.PASS_NAME: "tensor.dim of a bound tensor -> its ember_shape symbol "
                                  "(or affine expression of symbols)",
    shape_exact_reshapes.PASS_NAME: "tensor.reshape splitting/merging one dim -> "
                                    "tensor.expand_shape/collapse_shape",
    concat_of_slices.PASS_NAME: "concat of equally shaped slices of one tensor -> one "
                                "gather loop nest",
    merge_elementwise.PASS_NAME: "elementwise generics over one iteration space -> one "
                                 "multi-result generic (multi-use producers, siblings)",
    read_only_arguments.PASS_NAME: "public functions' tensor arguments -> "
                                   "bufferization.writable = false (never overwrite the caller's)",
    zero_size_arguments.PASS_NAME: "unused tensor<5x0xf32> arguments -> tensor<0xf32> (bare "
                                   "pointers)",
}


# name -> what the pass needs of its input IR ("bufferized": no tensor values left).
PASS_REQUIREMENTS = {}


def register_python_pass(name, fn, description="", requires=None):
    PYTHON_PASSES[name] = fn
    PASS_DESCRIPTIONS[name] = description
    if requires:
        PASS_REQUIREMENTS[name] = requires
