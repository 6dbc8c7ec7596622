"""Run a tool's check once per name, each in a fresh process (`python -m TOOL --one NAME`),
so that a crash or a hang costs one line of the report, not the run."""
import argparse
import os
import subprocess
import sys


def run_each(tool, names, extra_args=(), timeout=900, width=14):
    """Print each child's lines (its first line's second word is the status: OK, WRONG,
    RAISED; CRASH when the child died or timed out); return {status: count}."""
    counts = {}
    for name in names:
        command = [sys.executable, "-m", tool, "--one", name, *extra_args]
        try:
            proc = subprocess.run(command, capture_output=True, text=True, timeout=timeout,
                                  env=dict(os.environ))
            lines = [l for l in proc.stdout.splitlines() if l.strip()]
            if proc.returncode != 0 or not lines:
                lines = [f"{name:{width}s} CRASH  exit code {proc.returncode}: "
                         + (proc.stderr.strip().splitlines() or [""])[-1][:200]]
        except subprocess.TimeoutExpired:
            lines = [f"{name:{width}s} CRASH  timed out after {timeout:.0f} s"]
        print("\n".join(lines), flush=True)
        status = lines[0].split()[1]
        counts[status] = counts.get(status, 0) + 1
    print("summary: " + ", ".join(f"{k} {v}" for k, v in sorted(counts.items()))
          + f" of {len(names)}")
    return counts


def tool_main(argv, *, tool, doc, all_names, run_one, what, timeout, width=14):
    """The command line these tools share: --<what> a,b (default: all), --strict,
    --timeout; each name in its own process (`--one NAME`). Exit status 1 unless all OK."""
    p = argparse.ArgumentParser(prog=f"python -m {tool}", description=doc,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument(f"--{what}", default=None, help="comma-separated (default: all)")
    p.add_argument("--strict", action="store_true", help="fallbacks are failures")
    p.add_argument("--timeout", type=float, default=timeout, help="seconds per name")
    p.add_argument("--one", default=None, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.one:
        run_one(args.one, args.strict)
        return 0
    known = list(all_names())
    chosen = getattr(args, what)
    names = chosen.split(",") if chosen else known
    unknown = [n for n in names if n not in known]
    if unknown:
        p.error(f"unknown {what} {unknown}; known: {', '.join(known)}")
    counts = run_each(tool, names, ["--strict"] if args.strict else [], timeout=args.timeout,
                      width=width)
    return 0 if set(counts) <= {"OK"} else 1
