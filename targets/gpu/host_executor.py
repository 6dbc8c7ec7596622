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

Kernels with barriers (shared-memory reductions) run each thread of a block as an OS
thread (`@ember_thread_<k>`), the barrier calling back into the launcher; the special
registers are read from a per-thread context passed as a new first kernel parameter. Building the object runs in the codegen worker; loading it
here only links it (targets/cpu/loader.py).
"""
import ctypes
import functools
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


_BARRIER = re.compile(r"@llvm\.nvvm\.barrier[\w.]*\([^)]*\)")


def uses_barriers(text):
    return bool(_BARRIER.search(text))


def host_kernel_text(text, name):
    """The kernel IR of one gpu.module rewritten to run on the host (see above)."""
    text = text.replace("define ptx_kernel ", "define ")
    # shared memory: an ordinary global (one block runs at a time)
    text = text.replace(" addrspace(3)", "")
    if "addrspacecast" in text:
        raise HostExecutorError("the kernel casts between address spaces")
    text = _BARRIER.sub("@ember_barrier()", text)
    # special registers: read from the calling thread's context, a new first parameter
    text = _SREG.sub(lambda m: f"@ember_sreg_{m.group(1)}_{m.group(2)}", text)
    text = re.sub(r"@(ember_sreg_\w+)\(\)", r"@\1(ptr %ember.ctx)", text)
    text = text.replace(f"define void @{name}(", f"define void @{name}(ptr %ember.ctx, ", 1)
    wrappers, needs = _math_wrappers(text)
    kept = []
    for line in text.split("\n"):
        m = _DECLARE.match(line)
        if m and (m.group(1).startswith("__nv_") or m.group(1).startswith("llvm.nvvm.barrier")):
            continue
        kept.append(line)
    text = "\n".join(kept)
    left = set(re.findall(r"@llvm\.nvvm\.[\w.]+", text))
    if left:
        raise HostExecutorError(f"no host version of {', '.join(sorted(left))}")
    if "declare void @ember_barrier()" not in text:
        needs.add("declare void @ember_barrier()")
    return text + "\n" + "\n".join(wrappers) + "\n" + "\n".join(sorted(needs)) + "\n"


def _registers_module():
    # a device-side assertion (cf.assert, e.g. an index bound) sets a flag that the
    # launcher turns into an error after the kernel; a block barrier is a POSIX barrier
    # the launcher sets up (threads of a block are OS threads then): native, so a
    # barrier costs a futex wake, not a Python callback taking the GIL per thread
    lines = ["@ember_assert_failed = global i32 0",
             "define void @__assertfail(ptr %m, ptr %f, i32 %l, ptr %fn, i64 %s) {\n"
             "  store i32 1, ptr @ember_assert_failed\n  ret void\n}",
             "define i32 @ember_take_assert_flag() {\n"
             "  %v = load i32, ptr @ember_assert_failed\n"
             "  store i32 0, ptr @ember_assert_failed\n  ret i32 %v\n}",
             "@ember_barrier_object = global ptr null",
             "define void @ember_set_barrier(ptr %b) {\n"
             "  store ptr %b, ptr @ember_barrier_object\n  ret void\n}",
             "declare i32 @pthread_barrier_wait(ptr)",
             "define void @ember_barrier() {\n  %b = load ptr, ptr @ember_barrier_object\n"
             "  %r = call i32 @pthread_barrier_wait(ptr %b)\n  ret void\n}"]
    # float -> bfloat rounding (nearest even, NaN kept quiet): the x86 backend calls
    # compiler-rt's __truncsfbf2 for it, which this process does not have
    lines.append("""define bfloat @__truncsfbf2(float %f) {
  %b = bitcast float %f to i32
  %nan = fcmp uno float %f, %f
  %high = lshr i32 %b, 16
  %odd = and i32 %high, 1
  %bias = add i32 %odd, 32767
  %rounded = add i32 %b, %bias
  %r = lshr i32 %rounded, 16
  %quiet = or i32 %high, 64
  %bits = select i1 %nan, i32 %quiet, i32 %r
  %t = trunc i32 %bits to i16
  %o = bitcast i16 %t to bfloat
  ret bfloat %o
}""")
    for k, r in enumerate(_REGISTERS):
        lines.append(f"define i32 @ember_sreg_{r}(ptr %c) {{\n"
                     f"  %p = getelementptr i32, ptr %c, i64 {k}\n"
                     f"  %v = load i32, ptr %p\n  ret i32 %v\n}}")
    return "\n".join(lines)


def _store_register(register, value, k):
    return (f"  %rp{k} = getelementptr i32, ptr %ctx, i64 {_REGISTERS.index(register)}\n"
            f"  store i32 {value}, ptr %rp{k}")


def _loads(param_types):
    loads, args = [], ["ptr %ctx"]
    for i, t in enumerate(param_types):
        loads.append(f"  %pp{i} = getelementptr ptr, ptr %params, i64 {i}\n"
                     f"  %pa{i} = load ptr, ptr %pp{i}\n  %v{i} = load {t}, ptr %pa{i}")
        args.append(f"{t} %v{i}")
    return "\n".join(loads), ", ".join(args)


_DIMS = ["gx", "gy", "gz", "bx", "by", "bz"]
_SIZE_REGISTERS = ["nctaid_x", "nctaid_y", "nctaid_z", "ntid_x", "ntid_y", "ntid_z"]


def _sizes_into_context():
    return "\n".join(f"  %t_{d} = trunc i64 %{d} to i32\n" + _store_register(r, f"%t_{d}", d)
                     for d, r in zip(_DIMS, _SIZE_REGISTERS))


def _split(linear, order, tag):
    """Stores of `linear` split over (size, register) pairs, first fastest."""
    out, rest = [], linear
    for k, (d, r) in enumerate(order):
        out.append(f"  %{tag}q{k} = urem i64 {rest}, %{d}\n"
                   f"  %{tag}r{k} = trunc i64 %{tag}q{k} to i32\n"
                   + _store_register(r, f"%{tag}r{k}", f"{tag}{k}") +
                   f"\n  %{tag}n{k} = udiv i64 {rest}, %{d}")
        rest = f"%{tag}n{k}"
    return "\n".join(out)


_THREAD_ORDER = [("bx", "tid_x"), ("by", "tid_y"), ("bz", "tid_z")]
_BLOCK_ORDER = [("gx", "ctaid_x"), ("gy", "ctaid_y"), ("gz", "ctaid_z")]
_SIGNATURE = "ptr %params, i64 %gx, i64 %gy, i64 %gz, i64 %bx, i64 %by, i64 %bz"


def _product(name, dims):
    lines, value = [], f"%{dims[0]}"
    for k, d in enumerate(dims[1:]):
        lines.append(f"  %{name}{k} = mul i64 {value}, %{d}")
        value = f"%{name}{k}"
    return "\n".join(lines), value


def _runner(kernel, param_types, threaded):
    """The host entry of one kernel, arguments read from the kernelParams array:
    `@ember_run_<kernel>(ptr %params, i64 gx, .., i64 bz)` walks every thread of the grid
    in turn (kernels without barriers); `@ember_thread_<kernel>(..., i64 %t)` runs
    thread %t of every block in turn, for kernels with barriers: the launcher runs one
    OS thread per thread of a block, all meeting at each barrier and after each block."""
    loads, args = _loads(param_types)
    if threaded:
        name, extra, fixed = f"ember_thread_{kernel}", ", i64 %t", \
            _split("%t", _THREAD_ORDER, "t")
        count, order, after = ["gx", "gy", "gz"], _BLOCK_ORDER, "  call void @ember_barrier()"
    else:
        name, extra, fixed = f"ember_run_{kernel}", "", ""
        count, order, after = _DIMS, _THREAD_ORDER + _BLOCK_ORDER, ""
    multiply, total = _product("n", count)
    return f"""
define void @{name}({_SIGNATURE}{extra}) {{
entry:
  %ctx = alloca [12 x i32]
{_sizes_into_context()}
{fixed}
{loads}
{multiply}
  %empty = icmp eq i64 {total}, 0
  br i1 %empty, label %done, label %loop
loop:
  %lin = phi i64 [0, %entry], [%next, %loop]
{_split("%lin", order, "a")}
  call void @{kernel}({args})
{after}
  %next = add i64 %lin, 1
  %more = icmp ult i64 %next, {total}
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
    exported = {"ember_take_assert_flag", "ember_set_barrier", "__truncsfbf2"}
    for name, text, types in kernels:
        host = host_kernel_text(text, name)
        runner = _runner(name, types, uses_barriers(text))
        exported.add(("ember_thread_" if uses_barriers(text) else "ember_run_") + name)
        module = llvm.parse_assembly(host + runner)
        module.triple, module.data_layout = linked.triple, linked.data_layout
        module.verify()
        linked.link_in(module)
    from ember.targets.cuda.ptx import internalize_and_optimize
    internalize_and_optimize(linked, exported, tm, 2)
    return tm.emit_object(linked)


_LOCK = threading.Lock()  # the special registers are process globals
_PTHREAD_BARRIER_BYTES = 128  # sizeof(pthread_barrier_t) is 32 on x86-64 glibc


@functools.lru_cache(maxsize=None)
def _libc():
    return ctypes.CDLL(None)


class HostExecutor:
    """Loads a graph's host object and launches its kernels from kernelParams arrays."""

    def __init__(self, object_bytes, kernel_names):
        from ember.targets.cpu.loader import load_objects
        self._engine = load_objects([object_bytes])
        runner = ctypes.CFUNCTYPE(None, ctypes.c_void_p, *[ctypes.c_int64] * 6)
        threaded = ctypes.CFUNCTYPE(None, ctypes.c_void_p, *[ctypes.c_int64] * 7)
        self._run, self._threaded = {}, {}
        for name in kernel_names:
            address = self._engine.get_function_address(f"ember_run_{name}")
            if address:
                self._run[name] = runner(address)
                continue
            address = self._engine.get_function_address(f"ember_thread_{name}")
            if not address:
                raise HostExecutorError(f"kernel runner for {name} missing")
            self._threaded[name] = threaded(address)
        self._take_assert_flag = ctypes.CFUNCTYPE(ctypes.c_int32)(
            self._engine.get_function_address("ember_take_assert_flag"))
        self._set_barrier = ctypes.CFUNCTYPE(None, ctypes.c_void_p)(
            self._engine.get_function_address("ember_set_barrier"))

    def launch(self, name, grid, block, params_address):
        with _LOCK:
            if name in self._run:
                self._run[name](params_address, *grid, *block)
            else:
                self._launch_threads(name, grid, block, params_address)
            if self._take_assert_flag():
                raise RuntimeError(f"ember: a device-side assertion failed in kernel {name} "
                                   "(e.g. an index out of range)")

    def _launch_threads(self, name, grid, block, params_address):
        """One OS thread per thread of a block (the compiled code runs without the GIL);
        they meet at every barrier and after every block."""
        count = block[0] * block[1] * block[2]
        barrier = ctypes.create_string_buffer(_PTHREAD_BARRIER_BYTES)
        if _libc().pthread_barrier_init(barrier, None, count) != 0:
            raise HostExecutorError(f"kernel {name}: no barrier for {count} threads")
        self._set_barrier(ctypes.addressof(barrier))
        run = self._threaded[name]
        errors = []

        def thread(t):
            try:
                run(params_address, *grid, *block, t)
            except Exception as exc:  # pragma: no cover - a broken barrier
                errors.append(exc)
        workers = [threading.Thread(target=thread, args=(t,)) for t in range(count)]
        for w in workers:
            w.start()
        for w in workers:
            w.join()
        _libc().pthread_barrier_destroy(barrier)
        if errors:
            raise HostExecutorError(f"kernel {name}: {errors[0]}")
