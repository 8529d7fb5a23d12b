#!/usr/bin/env python3
"""The GPU cost model's instruction estimate against SASS counts.

On a GPU, fusejit charges a generated kernel's compute time as its estimated
SASS instructions at the issue rate (src/cost/gpu_instructions.h: the op
table's `gpu instructions` per op, plus loop, stream and reduction terms).
This checks the estimate kernel by kernel: for each graph it reads the
per-kernel `instructions` of `fusejit plan --json --device h200` for the
unfused and the fused plan, emits both plans (`fusejit emit`), counts each
kernel's main loop with bench/sass_count.py, and prints model and count per
element side by side. The count is the fast path (an IEEE division's or
square root's rarely taken out-of-range call left out), as the op weights
are.

  bench/instruction_model.py [GRAPH.fj ...] [--fusejit build/fusejit]
      [--ptxas P --cuobjdump C --ptx-version V] [--json]

Without graphs it checks examples/graphs/*.fj. It needs ptxas and cuobjdump
(see bench/sass_count.py); nothing here needs a GPU. Exit status 1 if a
kernel could not be counted.
"""
import argparse
import glob
import importlib.util
import json
import math
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
spec = importlib.util.spec_from_file_location("sass_count", os.path.join(HERE, "sass_count.py"))
sass_count = importlib.util.module_from_spec(spec)
spec.loader.exec_module(sass_count)


def run(command):
    result = subprocess.run(command, capture_output=True, text=True)
    if result.returncode != 0:
        sys.exit(f"instruction_model.py: {' '.join(command)} failed:\n{result.stderr.strip()}")
    return result.stdout


def check_graph(graph, args, workdir):
    plans = json.loads(run([args.fusejit, "plan", graph, "--device", "h200", "--json"]))
    rows = []
    for label in ("unfused", "fused"):
        out = os.path.join(workdir, os.path.basename(graph) + "-" + label)
        run([args.fusejit, "emit", graph, "--out", out] + (["--unfused"] if label == "unfused" else []))
        for k in plans[label]["kernels"]:
            if k["instructions"] is None:
                continue  # a matmul: a library kernel, not generated
            ptx = os.path.join(out, k["name"] + ".ptx")
            counted = sass_count.count_kernel(ptx, ptx[:-len(".ptx")] + ".cu", args, workdir)
            model = k["instructions"] / math.prod(k["iteration"])
            rows.append({"graph": os.path.basename(graph), "plan": label, "kernel": k["name"],
                         "model_per_element": round(model, 2),
                         "sass_per_element": counted.get("fast_path_per_element"),
                         "error": counted["error"] or counted.get("not_per_element")})
    return rows


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("graphs", nargs="*", help="graphs in the .fj format (default: examples/graphs/*.fj)")
    parser.add_argument("--fusejit", default=os.path.join(HERE, "..", "build", "fusejit"), help="the fusejit binary")
    parser.add_argument("--ptxas", help="ptxas to assemble with (default: the CUDA toolkit's)")
    parser.add_argument("--cuobjdump", help="cuobjdump to disassemble with (default: the CUDA toolkit's)")
    parser.add_argument("--ptx-version", help="rewrite the PTX's .version to this (for an older ptxas)")
    parser.add_argument("--json", action="store_true", help="one JSON object: {\"kernels\": [...]}")
    args = parser.parse_args()
    args.ptxas = sass_count.tool("ptxas", args.ptxas)
    args.cuobjdump = sass_count.tool("cuobjdump", args.cuobjdump)
    graphs = args.graphs or sorted(glob.glob(os.path.join(HERE, "..", "examples", "graphs", "*.fj")))
    with tempfile.TemporaryDirectory() as workdir:
        rows = [row for g in graphs for row in check_graph(g, args, workdir)]
    failed = [r for r in rows if r["sass_per_element"] is None]
    if args.json:
        print(json.dumps({"kernels": rows}, indent=2))
        sys.exit(1 if failed else 0)
    print(f"{'graph':<34} {'plan':<8} {'kernel':<36} {'model':>7} {'SASS':>7} {'model/SASS':>10}")
    ratios = []
    for r in rows:
        if r["sass_per_element"] is None:
            print(f"{r['graph']:<34} {r['plan']:<8} {r['kernel']:<36} {r['model_per_element']:7.1f}  not counted: "
                  f"{r['error']}")
            continue
        ratio = r["model_per_element"] / r["sass_per_element"]
        ratios.append(ratio)
        print(f"{r['graph']:<34} {r['plan']:<8} {r['kernel']:<36} {r['model_per_element']:7.1f} "
              f"{r['sass_per_element']:7.1f} {ratio:10.2f}")
    if ratios:
        print(f"{len(ratios)} kernels: model/SASS from {min(ratios):.2f} to {max(ratios):.2f}")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
