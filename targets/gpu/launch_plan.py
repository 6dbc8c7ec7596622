"""The launch plan in the user's process: host_plan.py's steps as a list of Python
closures over a slot array. Buffers come from torch's allocator on the launcher's device
(the CUDA caching allocator on a GPU); each kernel launch packs its arguments into one
`void **kernelParams` array, the exact array cuLaunchKernel reads, and hands it to the
launcher (cuda_launcher.py on a GPU, host_executor.py in tests).

A kernel whose buffers have static layouts takes one pointer per buffer
(vendor_conversion.py); other memref arguments follow MLIR's default calling convention:
a `memref<RxC>` is 7
parameters, [allocated, aligned, offset, size0, size1, stride0, stride1]. A view keeps its
memref offset beside its torch view (a kernel whose memref type has a static offset adds
it itself), so the pointers passed are those of the view's element 0 minus that offset. The count is checked against each kernel's
LLVM signature when the plan is built.
"""
import ctypes
import math
import operator

import torch
import torch._prims_common

_CTYPES = {"ptr": ctypes.c_void_p, "i64": ctypes.c_int64, "i32": ctypes.c_int32,
           "i16": ctypes.c_int16, "i8": ctypes.c_int8, "i1": ctypes.c_bool,
           "float": ctypes.c_float, "double": ctypes.c_double}


class LaunchPlanError(RuntimeError):
    pass


def _truncdiv(a, b):
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b > 0) else -q


_ARITH = {"add": operator.add, "sub": operator.sub, "mul": operator.mul,
          "floordiv": operator.floordiv, "truncdiv": _truncdiv,
          "ceildiv": lambda a, b: -(-a // b), "mod": operator.mod,
          "truncmod": lambda a, b: a - b * _truncdiv(a, b), "min": min, "max": max,
          "id": lambda a: a, "div": operator.truediv, "float": float, "int": int,
          "neg": operator.neg, "and": operator.and_, "or": operator.or_,
          "xor": operator.xor}
_CMPI = {"eq": operator.eq, "ne": operator.ne, "slt": operator.lt, "sle": operator.le,
         "sgt": operator.gt, "sge": operator.ge, "ult": operator.lt, "ule": operator.le,
         "ugt": operator.gt, "uge": operator.ge}


def _reader(ref):
    if isinstance(ref, tuple) and ref[0] == "slot":
        k = ref[1]
        return lambda s: s[k]
    return lambda s: ref


class LaunchPlan:
    """plan(*inputs) -> list of output tensors."""

    def __init__(self, arguments, steps, kernels, signatures, launcher, symbols=()):
        self._symbols = {name: k for k, name in enumerate(symbols)}
        self._plan = (arguments, steps, kernels, signatures, symbols)
        self.launcher = launcher
        self.device = launcher.device
        self._arguments = arguments
        self._size = 1 + max([a for a in arguments] + [_max_slot(s) for s in steps] + [0])
        self._steps = [self._build(step, kernels, signatures) for step in steps
                       if step[0] != "return"]
        ret = [s for s in steps if s[0] == "return"]
        self._outputs = [_reader(r) for r in (ret[0][1] if ret else [])]
        self.launches = sum(1 for s in steps if s[0] == "launch")

    def with_launcher(self, launcher):
        """The same plan launching through another launcher (tests: the CUDA driver)."""
        return LaunchPlan(*self._plan[:4], launcher, self._plan[4])

    # -- steps -----------------------------------------------------------------------
    def _build(self, step, kernels, signatures):
        kind = step[0]
        if kind == "const":
            _, k, value = step
            return lambda s: s.__setitem__(k, value)
        if kind == "arith":
            _, k, op, args, predicate = step
            read = [_reader(a) for a in args]
            if op == "select":
                c, a, b = read
                return lambda s: s.__setitem__(k, a(s) if c(s) else b(s))
            fn = _CMPI[predicate] if op == "cmpi" else _ARITH[op]
            if len(read) == 1:
                (a,) = read
                return lambda s: s.__setitem__(k, fn(a(s)))
            a, b = read
            return lambda s: s.__setitem__(k, fn(a(s), b(s)))
        if kind == "alloc":
            _, k, dtype, shape = step
            dtype, dims, device = getattr(torch, dtype), [_reader(d) for d in shape], self.device
            return lambda s: s.__setitem__(k, (torch.empty([d(s) for d in dims], dtype=dtype,
                                                           device=device), 0))
        if kind == "global":
            _, k, array = step
            device, cached = self.device, []

            def constant(s):  # made on the first call: plans are built under fake mode
                if not cached:
                    cached.append(torch.from_numpy(array.copy()).to(device))
                s[k] = (cached[0], 0)
            return constant
        if kind == "dim":
            _, k, src, index = step
            src, index = _reader(src), _reader(index)
            return lambda s: s.__setitem__(k, src(s)[0].shape[index(s)])
        if kind == "metadata":
            _, slots, src, rank = step
            src = _reader(src)

            def metadata(s):
                t, offset = src(s)
                # the base buffer: the storage this view's memref offset counts from
                s[slots[0]] = (t, offset, "base")
                s[slots[1]] = offset
                for i in range(rank):
                    s[slots[2 + i]] = t.shape[i]
                    s[slots[2 + rank + i]] = t.stride()[i]
            return metadata
        if kind == "view":
            _, k, src, offset, sizes, strides = step
            src, offset = _reader(src), _reader(offset)
            sizes, strides = [_reader(x) for x in sizes], [_reader(x) for x in strides]

            def view(s):
                entry = src(s)
                t, base_offset = entry[0], entry[1]
                # origin: storage offset of element 0 of the base buffer
                origin = t.storage_offset() - base_offset
                off = offset(s)
                s[k] = (t.as_strided([d(s) for d in sizes], [d(s) for d in strides],
                                     origin + off), off)
            return view
        if kind == "host_array":  # a dynamic reshape's shape, built on the host
            _, k, n = step
            return lambda s: s.__setitem__(k, [0] * n)
        if kind == "store":
            _, value, array, index = step
            value, array, index = _reader(value), _reader(array), _reader(index)
            return lambda s: array(s).__setitem__(index(s), value(s))
        if kind == "load":
            _, k, array, index = step
            array, index = _reader(array), _reader(index)
            return lambda s: s.__setitem__(k, array(s)[index(s)])
        if kind == "reshape":  # of an identity-layout buffer: a contiguous view
            _, k, src, shape = step
            src, shape = _reader(src), _reader(shape)

            def reshape(s):
                t, offset = src(s)[:2]
                dims = list(shape(s))
                s[k] = (t.as_strided(dims, torch._prims_common.make_contiguous_strides_for(
                    dims), t.storage_offset()), offset)
            return reshape
        if kind == "alias":
            _, k, src = step
            src = _reader(src)
            return lambda s: s.__setitem__(k, src(s))
        if kind == "einsum":
            _, equation, (a, b, c) = step
            a, b, c = _reader(a), _reader(b), _reader(c)

            def contract(s):  # C += A . B through the vendor BLAS torch links
                out = c(s)[0]
                out.add_(torch.einsum(equation, a(s)[0], b(s)[0]))
            return contract
        if kind == "launch":
            return self._launch(step, kernels, signatures)
        if kind == "symbol":  # the call's size values are in the last slot
            _, k, name = step
            index = self._symbols[name]
            return lambda s: s.__setitem__(k, s[-1][index])
        if kind == "assert":
            _, cond, message = step
            cond = _reader(cond)

            def check(s):
                if not cond(s):
                    raise RuntimeError(f"ember: a run-time check of the compiled graph "
                                       f"failed: {message}")
            return check
        raise LaunchPlanError(f"unknown launch-plan step {kind!r}")

    def _launch(self, step, kernels, signatures):
        _, name, grid, block, args, bare = step
        kernel = kernels[name]
        types = signatures[kernel]
        expected = sum(1 if a[0] != "memref" or bare else 3 + 2 * a[2] for a in args)
        if expected != len(types):
            raise LaunchPlanError(f"kernel {kernel} takes {len(types)} parameters, the plan "
                                  f"packs {expected}")
        grid, block = [_reader(g) for g in grid], [_reader(b) for b in block]
        readers = [(a[0], _reader(a[1]), a[2]) for a in args]
        ctypes_of = [_CTYPES.get(t) for t in types]
        if None in ctypes_of:
            raise LaunchPlanError(f"kernel {kernel}: parameter type "
                                  f"{types[ctypes_of.index(None)]} is not supported")
        array_type = ctypes.c_void_p * len(types)
        launch = self.launcher.launch

        def run(s):
            values = []
            for kind, read, rank in readers:
                v = read(s)
                if kind == "memref" and bare:  # the layout is baked into the kernel
                    values.append(v[0].data_ptr() - v[1] * v[0].element_size())
                elif kind == "memref":
                    # the kernel may add a static offset of its memref type itself
                    t, offset = v[0], v[1]
                    p = t.data_ptr() - offset * t.element_size()
                    values += [p, p, offset, *t.shape, *t.stride()]
                else:
                    values.append(v)
            g, b = [x(s) for x in grid], [x(s) for x in block]
            if math.prod(g) == 0 or math.prod(b) == 0:
                return
            boxed = [c(v) for c, v in zip(ctypes_of, values)]
            params = array_type(*[ctypes.addressof(x) for x in boxed])
            launch(kernel, g, b, ctypes.addressof(params))
        return run

    # -- call --------------------------------------------------------------------------
    def __call__(self, *inputs, sizes=()):
        s = [None] * (self._size + 1)
        s[-1] = sizes
        for k, x in zip(self._arguments, inputs):
            s[k] = (x, 0) if isinstance(x, torch.Tensor) else x
        for step in self._steps:
            step(s)
        outs = [read(s) for read in self._outputs]
        return [o[0] if isinstance(o, tuple) else o for o in outs]


def _max_slot(step):
    found = [0]

    def visit(x):
        if isinstance(x, tuple) and len(x) == 2 and x[0] == "slot":
            found.append(x[1])
        elif isinstance(x, (list, tuple)):
            for y in x:
                visit(y)
    visit(step[1:])
    if step[0] in ("const", "arith", "alloc", "global", "dim", "view", "alias", "symbol",
                   "host_array", "load", "reshape"):
        found.append(step[1])
    if step[0] == "metadata":
        found += step[1]
    return max(found)
