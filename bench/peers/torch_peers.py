#!/usr/bin/env python3
"""Times fusejit's example graphs in PyTorch eager and with torch.compile,
beside `fusejit bench` on the same graph, and prints one table.

    python3 bench/peers/torch_peers.py [--fusejit build/fusejit] [--device cuda|cpu]
                                       [--reps 20] [--json OUT] [GRAPH.fj ...]

The graphs are read from the .fj text format (default: every file in
examples/graphs/) and built op by op with torch functions, so PyTorch runs the
same ops on tensors of the same shapes and dtypes (its dropout draws its own
mask, which costs the same). Timing: CUDA events after a warm-up on the GPU,
time.perf_counter on the CPU; the median of --reps runs. On the GPU each
run is timed as `fusejit bench` times a kernel: from an L2 flushed by a
read-only pass, and with the write-back of what the run leaves dirty in L2.
One difference stays: PyTorch's time is one interval around the whole
graph (its kernels back to back, with any gaps between their launches),
fusejit's the sum of its kernels' times, each from a flushed L2. On the CPU PyTorch
gets as many threads as fusejit uses (one per hardware thread; its own
default is one per physical core). torch.compile needs PyTorch 2; with an
older one (Debian 12 packages 1.13 as python3-torch) that column says so.
Needs PyTorch; it uses nothing from the network.
"""
import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import time

import torch
import torch.nn.functional as F

DTYPES = {"f32": torch.float32, "f16": torch.float16, "bf16": torch.bfloat16}


def parse_fj(path):
    """(inputs [(name, dtype, shape)], statements [(name, op, args, attrs)], outputs)."""
    inputs, statements, outputs = [], [], []
    for raw in open(path):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        if line.startswith("input "):
            m = re.match(r"input\s+(\w+)\s*:\s*(\w+)\[([\d,\s]+)\]", line)
            inputs.append((m.group(1), DTYPES[m.group(2)], [int(e) for e in m.group(3).split(",")]))
        elif line.startswith("output "):
            outputs += [n.strip() for n in line[len("output "):].split(",")]
        else:
            m = re.match(r"(\w+)\s*=\s*(\w+)\((.*)\)$", line)
            args, attrs = [], {}
            for part in [p.strip() for p in m.group(3).split(",") if p.strip()]:
                if "=" in part:
                    key, value = part.split("=", 1)
                    attrs[key.strip()] = value.strip()
                else:
                    args.append(part)
            statements.append((m.group(1), m.group(2), args, attrs))
    return inputs, statements, outputs


def build_function(statements, outputs):
    """A Python function of the inputs that runs the statements with torch ops."""
    unary = {"neg": torch.neg, "abs": torch.abs, "exp": torch.exp, "log": torch.log, "sqrt": torch.sqrt,
             "rsqrt": torch.rsqrt, "reciprocal": torch.reciprocal, "square": torch.square, "tanh": torch.tanh,
             "sigmoid": torch.sigmoid, "relu": torch.relu, "silu": F.silu, "erf": torch.erf}
    binary = {"add": torch.add, "sub": torch.sub, "mul": torch.mul, "div": torch.div, "maximum": torch.maximum,
              "minimum": torch.minimum, "pow": torch.pow}

    def run(env):
        env = dict(env)

        def value(a):
            return env[a] if a in env else float(a)

        for name, op, args, attrs in statements:
            v = [value(a) for a in args]
            if op in unary:
                env[name] = unary[op](v[0])
            elif op in binary:
                env[name] = binary[op](v[0], v[1])
            elif op == "gelu":
                env[name] = F.gelu(v[0], approximate=attrs.get("approximate", "none"))
            elif op == "dropout":
                env[name] = F.dropout(v[0], p=float(attrs["p"]), training=True)
            elif op == "cast":
                env[name] = v[0].to(DTYPES[attrs["dtype"]])
            elif op in ("sum", "mean"):
                env[name] = getattr(torch, op)(v[0], dim=-1, keepdim=True)
            elif op == "max":
                env[name] = torch.amax(v[0], dim=-1, keepdim=True)
            elif op == "layer_norm":
                n = v[0].shape[-1]
                env[name] = F.layer_norm(v[0], (n,), v[1] if len(v) > 1 else None, v[2] if len(v) > 2 else None,
                                         float(attrs.get("eps", 1e-5)))
            elif op == "rms_norm":
                x = v[0].float()
                y = x * torch.rsqrt(x.square().mean(-1, keepdim=True) + float(attrs.get("eps", 1e-6)))
                env[name] = (y * v[1] if len(v) > 1 else y).to(v[0].dtype)
            elif op == "softmax":
                env[name] = torch.softmax(v[0], dim=-1)
            elif op == "log_softmax":
                env[name] = torch.log_softmax(v[0], dim=-1)
            elif op == "matmul":
                env[name] = v[0] @ v[1]
            else:
                raise SystemExit(f"torch_peers: op {op} has no torch mapping")
        return [env[o] for o in outputs]

    return run


def drain(flush):
    """A read-only pass over a buffer twice the L2 (as fusejit's fj_l2_flush):
    it leaves no dirty line of its own, and writes back those left before it."""
    flush.sum()


def time_us(fn, args, device, reps, flush):
    """The median time of fn, timed as `fusejit bench` times a kernel: from
    a flushed L2, with the GPU busy when the start event is recorded, and
    with the write-back of the dirty lines fn leaves in L2 (time of fn and
    a drain, less the drain's time alone; never less than fn's own)."""
    for _ in range(3):
        fn(*args)
    samples = []
    for _ in range(reps):
        if device == "cuda":
            events = [torch.cuda.Event(enable_timing=True) for _ in range(4)]
            drain(flush)
            events[0].record()
            fn(*args)
            events[1].record()
            drain(flush)
            events[2].record()
            drain(flush)
            events[3].record()
            torch.cuda.synchronize()
            work = events[0].elapsed_time(events[1])
            with_write_back = events[0].elapsed_time(events[2]) - events[2].elapsed_time(events[3])
            samples.append(max(work, with_write_back) * 1e3)
        else:
            t0 = time.perf_counter()
            fn(*args)
            samples.append((time.perf_counter() - t0) * 1e6)
    return statistics.median(samples)


def fusejit_times(binary, graph, device, reps, results_dir):
    if results_dir:  # `fusejit bench --json` of this graph, run earlier on this machine
        saved = os.path.join(results_dir, f"bench-{os.path.splitext(os.path.basename(graph))[0]}.json")
        try:
            with open(saved) as f:
                return json.load(f), None
        except (OSError, json.JSONDecodeError):
            pass  # not there, or that bench failed: run it here
    backend = "cuda" if device == "cuda" else "cpu"
    r = subprocess.run([binary, "bench", graph, "--backend", backend, "--reps", str(reps), "--json"],
                       capture_output=True, text=True)
    if r.returncode != 0:
        return None, r.stderr.strip().splitlines()[-1] if r.stderr.strip() else f"exit {r.returncode}"
    j = json.loads(r.stdout)
    return j, None


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("graphs", nargs="*")
    parser.add_argument("--fusejit", default="build/fusejit")
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--reps", type=int, default=20)
    parser.add_argument("--json", help="also write the results to this file")
    parser.add_argument("--no-compile", action="store_true", help="skip torch.compile")
    parser.add_argument("--fusejit-results", metavar="DIR",
                        help="take fusejit's times from DIR/bench-NAME.json (`fusejit bench --json`) where present")
    parser.add_argument("--threads", type=int, default=os.cpu_count(),
                        help="PyTorch's CPU threads (default: every hardware thread, as fusejit)")
    args = parser.parse_args()
    if args.device == "cpu":
        torch.set_num_threads(args.threads)
    has_compile = hasattr(torch, "compile")
    if not has_compile and not args.no_compile:
        print(f"torch.compile: not in torch {torch.__version__} (it needs PyTorch 2); that column is empty")
    root = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
    graphs = args.graphs or sorted(os.path.join(root, "examples", "graphs", f)
                                   for f in os.listdir(os.path.join(root, "examples", "graphs")) if f.endswith(".fj"))
    flush = None
    if args.device == "cuda":
        l2_bytes = getattr(torch.cuda.get_device_properties(0), "L2_cache_size", 0) or (64 << 20)
        flush = torch.ones(2 * l2_bytes // 4, dtype=torch.float32, device="cuda")
    rows = []
    where = torch.cuda.get_device_name() if args.device == "cuda" else f"cpu, {torch.get_num_threads()} threads"
    print(f"device: {where}, torch {torch.__version__}")
    print(f"{'graph':<34} {'eager us':>10} {'compile us':>11} {'fusejit unfused':>16} {'fusejit fused':>14} "
          f"{'fused vs eager':>15} {'fused vs compile':>17}")
    for graph in graphs:
        inputs, statements, outputs = parse_fj(graph)
        gen = torch.Generator(device=args.device).manual_seed(1)
        tensors = [torch.randn(shape, generator=gen, device=args.device, dtype=torch.float32).to(dtype)
                   for _, dtype, shape in inputs]
        run = build_function(statements, outputs)
        names = [n for n, _, _ in inputs]

        def eager(*ts):
            return run(dict(zip(names, ts)))

        with torch.no_grad():
            eager_us = time_us(eager, tensors, args.device, args.reps, flush)
            compile_us = None
            if has_compile and not args.no_compile:
                try:
                    compiled = torch.compile(eager)
                    compile_us = time_us(compiled, tensors, args.device, args.reps, flush)
                except Exception as e:  # noqa: BLE001 - report and go on
                    print(f"  torch.compile failed on {graph}: {e}", file=sys.stderr)
        fj, error = fusejit_times(args.fusejit, graph, args.device, args.reps, args.fusejit_results)
        fused = fj["fused"]["measured_us_median"] if fj else None
        unfused = fj["unfused"]["measured_us_median"] if fj else None
        row = {"graph": os.path.basename(graph), "eager_us": eager_us, "compile_us": compile_us,
               "fusejit_unfused_us": unfused, "fusejit_fused_us": fused, "fusejit_error": error}
        rows.append(row)

        def fmt(v):
            return f"{v:.1f}" if v is not None else "-"

        print(f"{row['graph']:<34} {fmt(eager_us):>10} {fmt(compile_us):>11} {fmt(unfused):>16} {fmt(fused):>14} "
              f"{(fmt(eager_us / fused) + 'x') if fused else '-':>15} "
              f"{(fmt(compile_us / fused) + 'x') if fused and compile_us else '-':>17}")
        if error:
            print(f"  fusejit bench failed: {error}", file=sys.stderr)
    if args.json:
        with open(args.json, "w") as out:
            json.dump({"device": args.device, "torch": torch.__version__, "threads": torch.get_num_threads(),
                       "graphs": rows}, out, indent=2)


if __name__ == "__main__":
    main()
