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
older ptxas; the counts then come from that ptxas's code generation). A
cuobjdump older than the ptxas (CUDA 11.8's beside CUDA 13's, as on the
development VM, whose toolkit has no cuobjdump) reads the newer cubin after
its ELF header is rewritten in the old encoding (old_elf_header): then the
counts are the newer ptxas's.

  fusejit emit examples/graphs/bias_gelu_dropout_layernorm.fj --out /tmp/k
  bench/sass_count.py /tmp/k [--json] [--top 8]

The count is static: the loop body once, both sides of every branch inside
it (a block reduction's warp-0-only part included), so it is an upper bound
on what most threads issue, by a few instructions per element. The "fast
path" figure leaves out what a predicated forward branch skips when the
skipped code calls a subroutine: the out-of-range case of an IEEE division,
square root or reciprocal, which ordinary data never takes (the branch and
the check before it are still counted). That is the figure the GPU cost
model's op weights come from (src/ir/ops.def).
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
    """Elements one thread handles per iteration of the kernel's main loop,
    and why not where that is no constant: kItems (kChunks * kVec) of a
    persistent row kernel, kVec of a vector pointwise kernel, 1 of a scalar
    one. A re-reading row kernel loops over its row's tiles in each pass, so
    its main loop has no fixed count of elements."""
    def constant(name):
        m = re.search(r"constexpr int %s = (\d+);" % name, cu_source)
        return int(m.group(1)) if m else None
    if "j += kThreads * kVec" in cu_source:
        return None, "a re-reading row kernel: its passes loop over the row"
    if re.search(r"constexpr int kItems = kChunks \* kVec;", cu_source):
        return constant("kChunks") * constant("kVec"), None
    if constant("kVec"):
        return constant("kVec"), None
    if "_items<1, false>" in cu_source:
        return 1, None
    return None, "no kItems or kVec in its source"


# A branch's target: an address, or a label that cuobjdump or nvdisasm
# prints as `(.L_x_N); a predicate operand may come first (BRA.U !UP0, 0x..;
# BRA.DIV ~URZ, 0x..).
BRANCH = re.compile(r"\bBRA(?:\.\w+)*\s+(?:[!~]?U?[PR]\w+,\s*)?(?:0x([0-9a-f]+)|`\(([.\w]+)\))")
LABEL = re.compile(r"^\s*([.\w]+):\s*$")
INSTRUCTION = re.compile(r"\s+/\*([0-9a-f]{4,})\*/\s+(.*?)\s*;")


def main_loop(sass_text):
    """The instructions of the widest backward branch's loop, or None."""
    instructions, labels, pending = [], {}, []
    for line in sass_text.splitlines():
        m = INSTRUCTION.match(line)
        if m:
            address = int(m.group(1), 16)
            instructions.append((address, m.group(2)))
            for label in pending:
                labels[label] = address
            pending = []
            continue
        m = LABEL.match(line)
        if m:
            pending.append(m.group(1))
    loops = []
    for address, text in instructions:
        m = BRANCH.search(text)
        if not m:
            continue
        target = int(m.group(1), 16) if m.group(1) else labels.get(m.group(2))
        if target is not None and target < address:
            loops.append((target, address))
    if not loops:
        return instructions, None
    start, end = max(loops, key=lambda l: l[1] - l[0])
    return instructions, [(address, text) for address, text in instructions if start <= address <= end]


def slow_path(body):
    """Addresses of the loop's slow paths: what a predicated forward branch
    skips when the skipped code calls a subroutine (a division's or a
    square root's out-of-range case, rarely taken)."""
    skipped = set()
    for i, (address, text) in enumerate(body):
        m = BRANCH.search(text)
        if not m or not m.group(1) or not text.startswith("@"):
            continue
        target = int(m.group(1), 16)
        region = [(a, t) for a, t in body[i + 1:] if a < target]
        if target > address and any(t.startswith("CALL") for _, t in region):
            skipped.update(a for a, _ in region)
    return skipped


def old_elf_header(cubin, arch):
    """Rewrites a cubin's ELF header in the encoding of CUDA 11 and 12.0, so
    that an older cuobjdump disassembles the code a newer ptxas made (this
    machine has CUDA 13's ptxas but no cuobjdump of its own). From CUDA 12.x
    on, a cubin's ELF ABI version is 0x41 and e_flags moved the architecture
    (sm_90: 0x6005a04); before, the ABI version was 0x33 and e_flags held the
    SM number twice (sm_90: 0x5a055a), which older tools read as "sm_4"
    otherwise. The instructions are the same bits for the same architecture.
    Returns False (and leaves the file) when the header is not the new one."""
    with open(cubin, "rb") as f:
        elf = bytearray(f.read())
    sm = re.fullmatch(r"sm_(\d+)a?", arch)
    if len(elf) < 0x34 or elf[:4] != b"\x7fELF" or elf[7] < 0x41 or not sm:
        return False
    number = int(sm.group(1))
    elf[7] = 0x33
    elf[0x30:0x34] = (number | 0x0500 | number << 16).to_bytes(4, "little")
    with open(cubin, "wb") as f:
        f.write(elf)
    return True


def count_kernel(ptx_path, cu_path, args, workdir):
    """One kernel's figures; a failure is reported in its "error", not raised."""
    name = os.path.splitext(os.path.basename(ptx_path))[0]
    result = {"name": name, "error": None}
    ptx = open(ptx_path).read()
    target = re.search(r"^\.target (sm_\w+)", ptx, re.M)
    if not target:
        return dict(result, error="no .target line in the PTX")
    result["arch"] = target.group(1)
    if args.ptx_version:
        ptx = re.sub(r"^\.version [\d.]+", ".version " + args.ptx_version, ptx, count=1, flags=re.M)
    ptx_copy = os.path.join(workdir, name + ".ptx")
    cubin = os.path.join(workdir, name + ".cubin")
    with open(ptx_copy, "w") as f:
        f.write(ptx)
    report = subprocess.run([args.ptxas, f"-arch={result['arch']}", "-v", ptx_copy, "-o", cubin],
                            capture_output=True, text=True)
    if report.returncode != 0:
        return dict(result, error=f"{args.ptxas} could not assemble it: {report.stderr.strip()}")
    registers = re.search(r"Used (\d+) registers", report.stderr)
    result["registers"] = int(registers.group(1)) if registers else None
    sass = subprocess.run([args.cuobjdump, "-sass", cubin], capture_output=True, text=True)
    if (sass.returncode != 0 or not INSTRUCTION.search(sass.stdout)) and old_elf_header(cubin, result["arch"]):
        sass = subprocess.run([args.cuobjdump, "-sass", cubin], capture_output=True, text=True)
        result["elf_header_rewritten"] = True
    if sass.returncode != 0 or not INSTRUCTION.search(sass.stdout):
        return dict(result, error=f"{args.cuobjdump} cannot read {os.path.basename(args.ptxas)}'s cubin: "
                    f"{(sass.stderr or sass.stdout).strip()}\n(pair the tools of one toolkit, or pass --ptxas and "
                    "--ptx-version for an older ptxas)")
    instructions, body = main_loop(sass.stdout)
    result["kernel_instructions"] = len(instructions)
    if body is None:
        return dict(result, error="no loop (backward branch) found in its SASS")
    per, why = elements_per_iteration(open(cu_path).read()) if os.path.exists(cu_path) else (None, "no .cu beside it")
    opcodes = collections.Counter(re.sub(r"^@!?U?P\w+\s+", "", t).split()[0].split(".")[0] for _, t in body)
    fast = len(body) - len(slow_path(body))
    result.update({
        "loop_instructions": len(body),
        "fast_path_instructions": fast,
        "elements_per_iteration": per,
        "instructions_per_element": round(len(body) / per, 2) if per else None,
        "fast_path_per_element": round(fast / per, 2) if per else None,
        "not_per_element": why,
        "opcodes": dict(opcodes.most_common()),
    })
    return result


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
        sys.exit(1 if any(k["error"] for k in kernels) else 0)
    failed = 0
    for k in kernels:
        if k["error"]:
            failed += 1
            print(f"{k['name']:<40} not counted: {k['error']}")
            continue
        per = k["instructions_per_element"]
        per_text = f"{per:6.1f} per element ({k['elements_per_iteration']} per thread and iteration)" if per else \
            f"not per element: {k['not_per_element']}"
        if per and k["fast_path_per_element"] != per:
            per_text += f", {k['fast_path_per_element']:.1f} on the fast path"
        print(f"{k['name']:<40} {k['loop_instructions']:5d} loop instructions, {per_text}, "
              f"{k['registers']} registers")
        print("    " + ", ".join(f"{op} {n}" for op, n in list(k["opcodes"].items())[:args.top]))
    if failed:
        sys.exit(1)

if __name__ == "__main__":
    main()
