"""The codegen worker: a long-lived child process that runs compiler/codegen.py.

Why a process: LLVM aborts on IR it does not expect, and torch-mlir's shape folding can
SIGFPE or segfault; in the user's process that would end their program. Here it ends the
worker, the caller gets a CodegenCrash (the graph then runs through ATen) and the next
request starts a fresh worker.

Protocol: length-prefixed pickles over the child's stdin/stdout (the child's own fd 1 is
pointed at stderr so a stray print cannot corrupt it). stderr goes to a temporary file
whose tail is reported when the child dies ("LLVM ERROR: ...").
"""
import atexit
import os
import pickle
import signal
import struct
import subprocess
import sys
import tempfile
import threading

_HEADER = struct.Struct("<Q")


class CodegenCrash(RuntimeError):
    """The worker died while compiling (a signal or an LLVM abort)."""


def _describe_exit(code):
    if code is not None and code < 0:
        try:
            return f"killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    return f"exited with status {code}"


class CodegenWorker:
    def __init__(self):
        self._proc = None
        self._stderr = None
        self._lock = threading.Lock()

    def _start(self):
        if self._stderr is not None:
            self._stderr.close()
        self._stderr = tempfile.TemporaryFile()
        env = dict(os.environ)
        env.setdefault("OMP_NUM_THREADS", "1")  # the worker never runs kernels
        self._proc = subprocess.Popen([sys.executable, "-m", "ember.compiler.worker"],
                                      stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                      stderr=self._stderr, env=env)

    def _stderr_tail(self, limit=2000):
        self._stderr.seek(0)
        text = self._stderr.read().decode(errors="replace").strip()
        lines = [l for l in text.splitlines() if l.strip()]
        return "\n".join(lines[-8:])[-limit:]

    def prestart(self):
        """Start the worker now (it imports torch and torch-mlir, about a second) so that
        the start overlaps Dynamo's and AOTAutograd's tracing instead of following it."""
        with self._lock:
            if self._proc is None or self._proc.poll() is not None:
                self._start()

    def request(self, payload):
        """Send one job, return the worker's reply dict; CodegenCrash if the worker died."""
        with self._lock:
            if self._proc is None or self._proc.poll() is not None:
                self._start()
            data = pickle.dumps(payload, protocol=pickle.HIGHEST_PROTOCOL)
            try:
                self._proc.stdin.write(_HEADER.pack(len(data)) + data)
                self._proc.stdin.flush()
                header = self._proc.stdout.read(_HEADER.size)
                reply = None
                if len(header) == _HEADER.size:
                    body = self._proc.stdout.read(_HEADER.unpack(header)[0])
                    reply = pickle.loads(body)
            except (BrokenPipeError, EOFError, pickle.UnpicklingError):
                reply = None
            if reply is None:
                code = self._proc.wait()
                tail = self._stderr_tail()
                for pipe in (self._proc.stdin, self._proc.stdout):
                    try:
                        pipe.close()
                    except OSError:
                        pass
                self._proc = None
                raise CodegenCrash(f"ember's codegen worker {_describe_exit(code)} while "
                                   f"compiling this graph" + (f": {tail}" if tail else ""))
            return reply

    def close(self):
        with self._lock:
            if self._proc is not None and self._proc.poll() is None:
                self._proc.stdin.close()
                try:
                    self._proc.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    self._proc.kill()
                    self._proc.wait()
            if self._proc is not None:
                self._proc.stdout.close()
            if self._stderr is not None:
                self._stderr.close()
            self._proc = self._stderr = None


_WORKER = CodegenWorker()
atexit.register(_WORKER.close)


def compile_in_worker(payload):
    return _WORKER.request(payload)


def prestart_worker():
    _WORKER.prestart()


def _serve():
    protocol_out = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)  # prints from the compiler land in stderr, not in the protocol
    protocol_in = sys.stdin.buffer
    from ember.compiler.codegen import build_object, preload

    preload()  # while the parent process is still tracing (prestart_worker)
    while True:
        header = protocol_in.read(_HEADER.size)
        if len(header) < _HEADER.size:
            return 0
        job = pickle.loads(protocol_in.read(_HEADER.unpack(header)[0]))
        if job.get("kind") == "crash-test":  # lets the tests kill a worker on purpose
            os.kill(os.getpid(), getattr(signal, job.get("signal", "SIGSEGV")))
        try:
            if job.get("kind") == "gpu":
                from ember.compiler.gpu_codegen import build_gpu_program
                reply = build_gpu_program(job["torch_ir"], vendor=job["vendor"],
                                          arch=job.get("arch"),
                                          host_executor=job.get("host_executor", False),
                                          dump_dir=job.get("dump_dir"),
                                          name=job.get("name", "graph"))
            else:
                reply = build_object(job["torch_ir"], opt_level=job.get("opt_level", 3),
                                     dump_dir=job.get("dump_dir"),
                                     name=job.get("name", "graph"),
                                     in_place=job.get("in_place", ()))
        except Exception as exc:  # a bug in a pass: report it, keep serving
            import traceback
            reply = {"ok": False, "stage": "internal",
                     "message": f"{type(exc).__name__}: {exc}\n{traceback.format_exc(limit=6)}"}
        data = pickle.dumps(reply, protocol=pickle.HIGHEST_PROTOCOL)
        protocol_out.write(_HEADER.pack(len(data)) + data)
        protocol_out.flush()


if __name__ == "__main__":
    sys.exit(_serve())
