"""ember-inline-fusion-groups: dissolve each `ember_fusion.group` after its body has been
fused into a single loop nest; the ops move in front of the group and the group's
results are replaced by the yielded values."""
from ember.compiler.ir_walk import collect, named
from ember.dialects.fusion import GROUP_OP_NAME

PASS_NAME = "ember-inline-fusion-groups"


def collect_groups(op):
    """Outermost groups under `op`."""
    return collect(op, named(GROUP_OP_NAME), skip_nested=True)


def inline_group(group):
    block = group.regions[0].blocks[0]
    body = list(block.operations)
    terminator = body[-1].operation
    for o in body[:-1]:
        o.operation.move_before(group)
    for res, value in zip(group.results, terminator.operands):
        res.replace_all_uses_with(value)
    terminator.erase()
    group.erase()


def inline_fusion_groups(op, pass_=None):
    groups = collect_groups(op)
    while groups:  # groups nested in groups surface once their parent is gone
        for g in groups:
            inline_group(g)
        groups = collect_groups(op)
