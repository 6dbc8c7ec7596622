"""The workspace size of a dynamic-shape graph, per call: the Python statements that
ember-plan-workspace leaves on the module (`ember.workspace_expr`) over the size
arguments `z`, compiled once into a function.

    "t0 = 16 * z[0]; t1 = tdiv(t0, 3); return (-(-max(t0, t1) // 64) * 64)"
"""


def _tdiv(a, b):
    """C's (and arith.divsi's) division: rounds toward zero."""
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b >= 0) else -q


def _trem(a, b):
    return a - b * _tdiv(a, b)


def size_function(body):
    """The function `z -> bytes` of one workspace expression body."""
    namespace = {"max": max, "min": min, "tdiv": _tdiv, "trem": _trem}
    exec(compile(f"def workspace_bytes(z): {body}", "<ember workspace size>", "exec"),
         namespace)
    return namespace["workspace_bytes"]
