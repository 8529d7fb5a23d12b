#!/usr/bin/env python3
"""SASS instructions per element of generated kernels: the issue budget.

A GPU issues one warp instruction per clock per SM sub-partition: an H100 or
H200 (132 SMs, 4 sub-partitions, 32 lanes, ~1.98 GHz boost) issues about
33e12 thread-instructions per second. A bf16 kernel that reads one element
and writes one (4 bytes) at the H200's 4.8 TB/s moves 1.2e12 elements per
second, so it stays memory-bound only while it needs fewer than about
28 instructions per element (H100: 40). Past that, no access pattern
reaches the memory roofline: the kernel is issue-bound.

This counts, for each kernel that `fusejit emit --out DIR` wrote, the
instructions of its main loop (the widest backward branch in the SASS) and
divides by the elements one thread handles per iteration (the kernel's
kItems for a row kernel, kVec for a pointwise one). It needs ptxas and
cuobjdump: those of the CUDA toolkit by default; any pair that agrees on the
cubin format works (--ptx-version rewrites the PTX's .version line for an
older ptxas; the counts then come from that ptxas's code generation).

  fusejit emit examples/graphs/bias_gelu_dropout_layernorm.fj --out /tmp/k
  bench/sass_count.py /tmp/k [--json] [--top 8]

The count is static: the loop body once, both sides of every branch inside
it (a block reduction's warp-0-only part included), so it is an upper bound
on what most threads issue, by a few instructions per element.
"""
import argparse
import collections
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile


def tool(name, given):
    if given:
        return given
    for root in (os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH"), "/usr/local/cuda"):
        if root and os.access(os.path.join(root, "bin", name), os.X_OK):
            return os.path.join(root, "bin", name)
    found = shutil.which(name)
    if not found:
        sys.exit(f"sass_count.py: no {name} in $CUDA_HOME/bin, $CUDA_PATH/bin, /usr/local/cuda/bin or PATH; "
                 f"name one with --{name}")
    return found


def elements_per_iteration(cu_source):
    """kItems of a row kernel (kChunks * kVec), else kVec (a pointwise kernel's group)."""
    def constant(name):
        m = re.search(r"constexpr int %s = (\d+);" % name, cu_source)
        return int(m.group(1)) if m else None
    if re.search(r"constexpr int kItems = kChunks \* kVec;", cu_source):
        return constant("kChunks") * constant("kVec")
    return constant("kItems") or constant("kVec")


def count_kernel(ptx_path, cu_path, args, workdir):
    ptx = open(ptx_path).read()
    arch = re.search(r"^\.target (sm_\w+)", ptx, re.M).group(1)
    if args.ptx_version:
        ptx = re.sub(r"^\.version [\d.]+", ".version " + args.ptx_version, ptx, count=1, flags=re.M)
    name = os.path.splitext(os.path.basename(ptx_path))[0]
    ptx_copy = os.path.join(workdir, name + ".ptx")
    cubin = os.path.join(workdir, name + ".cubin")
    with open(ptx_copy, "w") as f:
        f.write(ptx)
    report = subprocess.run([args.ptxas, f"-arch={arch}", "-v", ptx_copy, "-o", cubin], capture_output=True,
                            text=True)
    if report.returncode != 0:
        sys.exit(f"sass_count.py: ptxas failed on {ptx_path}:\n{report.stderr}")
    registers = int(re.search(r"Used (\d+) registers", report.stderr).group(1))
    sass = subprocess.run([args.cuobjdump, "-sass", cubin], capture_output=True, text=True)
    if sass.returncode != 0 or "/*0000*/" not in sass.stdout:
        sys.exit(f"sass_count.py: {args.cuobjdump} cannot read {ptxas_name(args)}'s cubin:\n{sass.stderr}{sass.stdout}"
                 "(pair tools of one toolkit, or pass --ptxas and --ptx-version for an older one)")
    instructions = []
    for line in sass.stdout.splitlines():
        m = re.match(r"\s+/\*([0-9a-f]{4,})\*/\s+(.*?)\s*;", line)
        if m:
            instructions.append((int(m.group(1), 16), m.group(2)))
    loops = []
    for address, text in instructions:
        m = re.search(r"\bBRA(?:\.\w+)* (?:`\(\S+\) )?0x([0-9a-f]+)", text)
        if m and int(m.group(1), 16) < address:
            loops.append((int(m.group(1), 16), address))
    start, end = max(loops, key=lambda l: l[1] - l[0]) if loops else (instructions[0][0], instructions[-1][0])
    body = [text for address, text in instructions if start <= address <= end]
    opcodes = collections.Counter(re.sub(r"^@!?U?P\w+\s+", "", t).split()[0].split(".")[0] for t in body)
    per = elements_per_iteration(open(cu_path).read()) if os.path.exists(cu_path) else None
    return {
        "name": name,
        "arch": arch,
        "registers": registers,
        "kernel_instructions": len(instructions),
        "loop_instructions": len(body),
        "elements_per_iteration": per,
        "instructions_per_element": round(len(body) / per, 2) if per else None,
        "opcodes": dict(opcodes.most_common()),
    }


def ptxas_name(args):
    return os.path.basename(args.ptxas)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("dirs", nargs="+", help="folders written by `fusejit emit --out`, or .ptx files")
    parser.add_argument("--ptxas", help="ptxas to assemble with (default: the CUDA toolkit's)")
    parser.add_argument("--cuobjdump", help="cuobjdump to disassemble with (default: the CUDA toolkit's)")
    parser.add_argument("--ptx-version", help="rewrite the PTX's .version to this (for an older ptxas)")
    parser.add_argument("--json", action="store_true", help="one JSON object: {\"kernels\": [...]}")
    parser.add_argument("--top", type=int, default=8, help="opcodes listed per kernel (default 8)")
    args = parser.parse_args()
    args.ptxas = tool("ptxas", args.ptxas)
    args.cuobjdump = tool("cuobjdump", args.cuobjdump)
    ptx_files = []
    for d in args.dirs:
        if os.path.isdir(d):
            ptx_files += sorted(os.path.join(d, f) for f in os.listdir(d) if f.endswith(".ptx"))
        else:
            ptx_files.append(d)
    if not ptx_files:
        sys.exit("sass_count.py: no .ptx files in " + ", ".join(args.dirs))
    with tempfile.TemporaryDirectory() as workdir:
        kernels = [count_kernel(p, p[:-len(".ptx")] + ".cu", args, workdir) for p in ptx_files]
    if args.json:
        print(json.dumps({"ptxas": args.ptxas, "cuobjdump": args.cuobjdump, "kernels": kernels}, indent=2))
        return
    for k in kernels:
        per = k["instructions_per_element"]
        per_text = f"{per:6.1f} per element ({k['elements_per_iteration']} per thread and iteration)" if per else \
            "elements per iteration unknown"
        print(f"{k['name']:<40} {k['loop_instructions']:5d} loop instructions, {per_text}, "
              f"{k['registers']} registers")
        print("    " + ", ".join(f"{op} {n}" for op, n in list(k["opcodes"].items())[:args.top]))


if __name__ == "__main__":
    main()
