#!/usr/bin/env python3
"""NVRTC compile time of kernel sources, compared in one process.

The 2-core development machine's speed drifts by up to 1.5x from minute to
minute, so compile times measured minutes apart cannot judge a change to the
generated code. This compiles each source in turn, round after round, with
the options fusejit uses, and reports each one's median and minimum time and
its median ratio to the first source's time in the same round.

  fusejit emit G.fj --out /tmp/a          # before the change
  fusejit emit G.fj --out /tmp/b          # after it
  bench/nvrtc_ab.py /tmp/a/K.cu /tmp/b/K.cu --rounds 8
  bench/nvrtc_ab.py K.cu K.cu@--Ofast-compile=mid   # SOURCE@OPTION adds an option

NVRTC is loaded with ctypes (libnvrtc.so.13 by default, --nvrtc to name
another), so nothing needs building.
"""
import argparse
import ctypes
import statistics
import sys
import time

DEFAULT_OPTIONS = ["--std=c++17", "-default-device", "--gpu-architecture=sm_90", "--ptxas-options=-v", "--minimal"]


def load_nvrtc(name):
    lib = ctypes.CDLL(name)
    lib.nvrtcCreateProgram.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.c_char_p, ctypes.c_char_p,
                                       ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p]
    lib.nvrtcCompileProgram.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.POINTER(ctypes.c_char_p)]
    lib.nvrtcDestroyProgram.argtypes = [ctypes.POINTER(ctypes.c_void_p)]
    lib.nvrtcGetProgramLogSize.argtypes = [ctypes.c_void_p, ctypes.POINTER(ctypes.c_size_t)]
    lib.nvrtcGetProgramLog.argtypes = [ctypes.c_void_p, ctypes.c_char_p]
    return lib


def compile_ms(nvrtc, source, options):
    """Milliseconds to create and compile one program; raises on a compile error."""
    argv = (ctypes.c_char_p * len(options))(*[o.encode() for o in options])
    program = ctypes.c_void_p()
    start = time.perf_counter()
    if nvrtc.nvrtcCreateProgram(ctypes.byref(program), source, b"k.cu", 0, None, None) != 0:
        raise RuntimeError("nvrtcCreateProgram failed")
    result = nvrtc.nvrtcCompileProgram(program, len(options), argv)
    elapsed = (time.perf_counter() - start) * 1e3
    if result != 0:
        size = ctypes.c_size_t()
        nvrtc.nvrtcGetProgramLogSize(program, ctypes.byref(size))
        log = ctypes.create_string_buffer(size.value)
        nvrtc.nvrtcGetProgramLog(program, log)
        nvrtc.nvrtcDestroyProgram(ctypes.byref(program))
        raise RuntimeError(log.value.decode(errors="replace"))
    nvrtc.nvrtcDestroyProgram(ctypes.byref(program))
    return elapsed


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("sources", nargs="+", help="kernel sources (.cu), each optionally SOURCE@OPTION")
    parser.add_argument("--rounds", type=int, default=8, help="timed rounds, after one warm-up round")
    parser.add_argument("--nvrtc", default="libnvrtc.so.13", help="the NVRTC library to load")
    args = parser.parse_args()
    if args.rounds < 1:
        parser.error("--rounds must be at least 1")
    try:
        nvrtc = load_nvrtc(args.nvrtc)
    except OSError as e:
        sys.exit(f"nvrtc_ab: cannot load {args.nvrtc}: {e}")
    entries = []
    for spec in args.sources:
        path, _, extra = spec.partition("@")
        try:
            with open(path, "rb") as f:
                source = f.read()
        except OSError as e:
            sys.exit(f"nvrtc_ab: {e}")
        entries.append((spec, source, DEFAULT_OPTIONS + ([extra] if extra else [])))
    times = [[] for _ in entries]
    ratios = [[] for _ in entries]
    for round_index in range(-1, args.rounds):  # round -1 warms NVRTC up
        row = []
        for spec, source, options in entries:
            try:
                row.append(compile_ms(nvrtc, source, options))
            except RuntimeError as e:
                sys.exit(f"nvrtc_ab: {spec} does not compile:\n{e}")
        if round_index < 0:
            continue
        for i, ms in enumerate(row):
            times[i].append(ms)
            ratios[i].append(ms / row[0])
    print(f"{'source':<48} {'median ms':>10} {'min ms':>8} {'vs first':>9}")
    for (spec, _, _), t, r in zip(entries, times, ratios):
        print(f"{spec:<48} {statistics.median(t):>10.1f} {min(t):>8.1f} {statistics.median(r):>9.3f}")


if __name__ == "__main__":
    main()
