#!/usr/bin/env python3
"""How `fusejit plan` time grows with the graph: whole models, not blocks.

Writes graphs of stacked transformer MLP layers (layer_norm, two matmuls with
bias, GeLU, dropout, a residual add, softmax; weights shared by every layer,
as when a graph is built by calling one layer function repeatedly) and a
graph of many sibling branches reading one input, runs `fusejit plan --json`
on each, and prints wall time per run, per graph node, and the growth from
one size to the next (1.0 per node: linear).

  bench/plan_scaling.py build/fusejit
  bench/plan_scaling.py build/fusejit --layers 100 1000 4000 --branches 1000 4000
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time


def layers_graph(layers):
    lines = ["input x: f32[64, 256]", "input w1: f32[256, 1024]", "input b1: f32[1024]",
             "input w2: f32[1024, 256]", "input b2: f32[256]", "input g: f32[256]", "input be: f32[256]"]
    h = "x"
    for i in range(layers):
        lines += [f"n{i} = layer_norm({h}, g, be, eps=1e-5)", f"h{i} = matmul(n{i}, w1)", f"hb{i} = add(h{i}, b1)",
                  f"a{i} = gelu(hb{i})", f"o{i} = matmul(a{i}, w2)", f"ob{i} = add(o{i}, b2)",
                  f"d{i} = dropout(ob{i}, p=0.1, seed={i})", f"r{i} = add({h}, d{i})", f"s{i} = softmax(r{i})",
                  f"q{i} = mul(s{i}, r{i})"]
        h = f"q{i}"
    return "\n".join(lines + [f"output {h}"]) + "\n"


def branches_graph(branches):
    lines = ["input x: f32[64, 256]"]
    for i in range(branches):
        lines += [f"w{i} = mul(x, {i + 1}.0)", f"t{i} = tanh(w{i})"]
    return "\n".join(lines + ["output " + ", ".join(f"t{i}" for i in range(branches))]) + "\n"


def time_plan(fusejit, text, reps):
    with tempfile.NamedTemporaryFile("w", suffix=".fj", delete=False) as f:
        f.write(text)
        path = f.name
    try:
        best = None
        for _ in range(reps):
            start = time.perf_counter()
            out = subprocess.run([fusejit, "plan", path, "--json"], check=True, capture_output=True, text=True)
            elapsed = time.perf_counter() - start
            best = elapsed if best is None else min(best, elapsed)
        plan = json.loads(out.stdout)
        return best, len(plan["fused"]["kernels"])
    finally:
        os.unlink(path)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("fusejit", help="the fusejit binary")
    parser.add_argument("--layers", type=int, nargs="+", default=[100, 400, 1600])
    parser.add_argument("--branches", type=int, nargs="+", default=[500, 2000, 8000])
    parser.add_argument("--reps", type=int, default=3, help="runs per graph; the fastest is reported")
    args = parser.parse_args()
    print(f"{'graph':<22} {'user ops':>9} {'fused kernels':>14} {'seconds':>9} {'us per op':>10} {'growth per op':>14}")
    for family, sizes, make, ops_per in (("layers", args.layers, layers_graph, 10),
                                         ("branches", args.branches, branches_graph, 2)):
        previous = None
        for size in sizes:
            seconds, kernels = time_plan(args.fusejit, make(size), args.reps)
            ops = size * ops_per
            per_op = seconds / ops * 1e6
            growth = "" if previous is None else f"{per_op / previous:.2f}"
            print(f"{family + ' ' + str(size):<22} {ops:>9} {kernels:>14} {seconds:>9.3f} {per_op:>10.1f} {growth:>14}")
            previous = per_op
    return 0


if __name__ == "__main__":
    sys.exit(main())
