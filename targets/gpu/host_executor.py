"""Run NVVM-lowered kernels on the CPU: a testing tool for machines without a GPU (CI),
not a target users pick. It checks numerics, argument order and grid sizes through the
SAME launch plan and kernel-parameter array (`void **kernelParams`) the CUDA launch uses;
it cannot check warp-level behaviour, memory-model races or ptxas.

The kernel's LLVM IR (the exact IR that becomes PTX) is rewritten for the host:

    %t = call i32 @llvm.nvvm.read.ptx.sreg.tid.x()    ->  call i32 @ember_sreg_tid_x()
    define ptx_kernel void @k(ptr %0, ...)             ->  define void @k(ptr %0, ...)
    declare float @__nv_erff(float)                    ->  a wrapper calling libm's erff

and each kernel gets a grid runner that walks every block and thread in turn:

    define void @ember_run_k(ptr %params, i64 %gx, .., i64 %bz) {
      for every (block, thread): set the special registers, load each argument from
      params[i] (what cuLaunchKernel reads), call @k(...)
    }

Kernels that synchronise (barriers, shared memory) would need threads of a block to run
concurrently and are refused. Building the object runs in the codegen worker; loading it
here only links it (targets/cpu/loader.py).
"""
import ctypes
import re
import threading

_SREG = re.compile(r"@llvm\.nvvm\.read\.ptx\.sreg\.(tid|ntid|ctaid|nctaid)\.([xyz])\b")
_DECLARE = re.compile(r"^declare [^@]*@([\w.$]+)\(([^)]*)\).*$", re.M)
_REGISTERS = [f"{r}_{d}" for r in ("tid", "ntid", "ctaid", "nctaid") for d in "xyz"]

# libdevice functions whose host twin has another name or is no single libm call
_SPECIAL = {
    "__nv_rsqrtf": "  %s = call float @sqrtf(float %a)\n  %r = fdiv float 1.0, %s\n",
    "__nv_rsqrt": "  %s = call double @sqrt(double %a)\n  %r = fdiv double 1.0, %s\n",
}
_SPECIAL_NEEDS = {"__nv_rsqrtf": "declare float @sqrtf(float)",
                  "__nv_rsqrt": "declare double @sqrt(double)"}


class HostExecutorError(ValueError):
    """A kernel uses something the host executor cannot imitate."""


def _math_wrappers(text):
    """Definitions for the `__nv_*` declarations of `text` (libm on the host)."""
    out, needs = [], set()
    for name, params in _DECLARE.findall(text):
        if not name.startswith("__nv_"):
            continue
        ret = re.search(r"^declare (?:\w+ )*?(float|double|i32|i64) @" + re.escape(name),
                        text, re.M).group(1)
        types = [p.strip().split()[0] for p in params.split(",") if p.strip()]
        args = ", ".join(f"{t} %a{i}" if i else f"{t} %a" for i, t in enumerate(types))
        if name in _SPECIAL:
            body = _SPECIAL[name]
            needs.add(_SPECIAL_NEEDS[name])
        else:
            host = name[len("__nv_"):]
            call_args = ", ".join(f"{t} %a{i}" if i else f"{t} %a" for i, t in enumerate(types))
            body = f"  %r = call {ret} @{host}({call_args})\n"
            needs.add(f"declare {ret} @{host}({', '.join(types)})")
        out.append(f"define internal {ret} @{name}({args}) {{\n{body}  ret {ret} %r\n}}")
    return out, needs


def host_kernel_text(text):
    """The kernel IR of one gpu.module rewritten to run on the host (see above)."""
    if "addrspace(3)" in text or "barrier" in text:
        raise HostExecutorError("the kernel synchronises threads or uses shared memory")
    text = text.replace("define ptx_kernel ", "define ")
    text = _SREG.sub(lambda m: f"@ember_sreg_{m.group(1)}_{m.group(2)}", text)
    wrappers, needs = _math_wrappers(text)
    kept = []
    for line in text.split("\n"):
        m = _DECLARE.match(line)
        if m and m.group(1).startswith("__nv_"):
            continue
        kept.append(line)
    text = "\n".join(kept)
    left = set(re.findall(r"@llvm\.nvvm\.[\w.]+", text))
    if left:
        raise HostExecutorError(f"no host version of {', '.join(sorted(left))}")
    return text + "\n" + "\n".join(wrappers) + "\n" + "\n".join(sorted(needs)) + "\n"


def _registers_module():
    # a device-side assertion (cf.assert, e.g. an index bound) sets a flag that the
    # launcher turns into an error after the kernel
    lines = ["@ember_assert_failed = global i32 0",
             "define void @__assertfail(ptr %m, ptr %f, i32 %l, ptr %fn, i64 %s) {\n"
             "  store i32 1, ptr @ember_assert_failed\n  ret void\n}",
             "define i32 @ember_take_assert_flag() {\n"
             "  %v = load i32, ptr @ember_assert_failed\n"
             "  store i32 0, ptr @ember_assert_failed\n  ret i32 %v\n}"]
    for r in _REGISTERS:
        lines.append(f"@ember_{r} = global i32 0")
        lines.append(f"define i32 @ember_sreg_{r}() {{\n"
                     f"  %v = load i32, ptr @ember_{r}\n  ret i32 %v\n}}")
    return "\n".join(lines)


def _runner(kernel, param_types):
    """`@ember_run_<kernel>(ptr %params, i64 gx, gy, gz, bx, by, bz)`: every thread of the
    grid in turn, arguments read from the kernelParams array."""
    loads, args = [], []
    for i, t in enumerate(param_types):
        loads.append(f"  %pp{i} = getelementptr ptr, ptr %params, i64 {i}\n"
                     f"  %pa{i} = load ptr, ptr %pp{i}\n  %v{i} = load {t}, ptr %pa{i}")
        args.append(f"{t} %v{i}")
    dims = ["gx", "gy", "gz", "bx", "by", "bz"]
    regs = ["nctaid_x", "nctaid_y", "nctaid_z", "ntid_x", "ntid_y", "ntid_z"]
    stores = "\n".join(f"  %t_{d} = trunc i64 %{d} to i32\n  store i32 %t_{d}, ptr @ember_{r}"
                       for d, r in zip(dims, regs))
    # linear index -> (tx, ty, tz, cx, cy, cz), thread x fastest
    order = [("bx", "tid_x"), ("by", "tid_y"), ("bz", "tid_z"),
             ("gx", "ctaid_x"), ("gy", "ctaid_y"), ("gz", "ctaid_z")]
    split, rest = [], "%lin"
    for k, (d, r) in enumerate(order):
        split.append(f"  %q{k} = urem i64 {rest}, %{d}\n  %r{k} = trunc i64 %q{k} to i32\n"
                     f"  store i32 %r{k}, ptr @ember_{r}\n  %n{k} = udiv i64 {rest}, %{d}")
        rest = f"%n{k}"
    return f"""
define void @ember_run_{kernel}(ptr %params, i64 %gx, i64 %gy, i64 %gz, i64 %bx, i64 %by, i64 %bz) {{
entry:
{stores}
{chr(10).join(loads)}
  %g1 = mul i64 %gx, %gy
  %g2 = mul i64 %g1, %gz
  %b1 = mul i64 %bx, %by
  %b2 = mul i64 %b1, %bz
  %total = mul i64 %g2, %b2
  %empty = icmp eq i64 %total, 0
  br i1 %empty, label %done, label %loop
loop:
  %lin = phi i64 [0, %entry], [%next, %loop]
{chr(10).join(split)}
  call void @{kernel}({", ".join(args)})
  %next = add i64 %lin, 1
  %more = icmp ult i64 %next, %total
  br i1 %more, label %loop, label %done
done:
  ret void
}}
"""


def host_object(kernels):
    """kernels: [(name, NVVM LLVM IR text, param types)] -> ELF object bytes for this
    host. Worker side: LLVM code generation can abort."""
    import llvmlite.binding as llvm
    llvm.initialize_native_target()
    llvm.initialize_native_asmprinter()
    tm = llvm.Target.from_default_triple().create_target_machine(opt=2)
    linked = llvm.parse_assembly(_registers_module())
    linked.triple, linked.data_layout = llvm.get_default_triple(), str(tm.target_data)
    for name, text, types in kernels:
        host = host_kernel_text(text)
        registers = "\n".join(f"@ember_{r} = external global i32" for r in _REGISTERS)
        module = llvm.parse_assembly(host + registers + _runner(name, types))
        module.triple, module.data_layout = linked.triple, linked.data_layout
        module.verify()
        linked.link_in(module)
    from ember.targets.cuda.ptx import internalize_and_optimize
    internalize_and_optimize(linked, {f"ember_run_{n}" for n, _, _ in kernels} |
                             {"ember_take_assert_flag"}, tm, 2)
    return tm.emit_object(linked)


_LOCK = threading.Lock()  # the special registers are process globals


class HostExecutor:
    """Loads a graph's host object and launches its kernels from kernelParams arrays."""

    def __init__(self, object_bytes, kernel_names):
        from ember.targets.cpu.loader import load_objects
        self._engine = load_objects([object_bytes])
        runner = ctypes.CFUNCTYPE(None, ctypes.c_void_p, *[ctypes.c_int64] * 6)
        self._run = {}
        for name in kernel_names:
            address = self._engine.get_function_address(f"ember_run_{name}")
            if not address:
                raise HostExecutorError(f"kernel runner for {name} missing")
            self._run[name] = runner(address)

        self._take_assert_flag = ctypes.CFUNCTYPE(ctypes.c_int32)(
            self._engine.get_function_address("ember_take_assert_flag"))

    def launch(self, name, grid, block, params_address):
        with _LOCK:
            self._run[name](params_address, *grid, *block)
            if self._take_assert_flag():
                raise RuntimeError(f"ember: a device-side assertion failed in kernel {name} "
                                   "(e.g. an index out of range)")
