#!/usr/bin/env python3
"""Fits the polynomial coefficients of src/codegen/cpu/fj_math.h (and of
src/codegen/cuda/fj_math.cuh's gelu).

Each approximation is a polynomial P in a reduced variable v on an interval;
the fit minimises the maximum weighted error |w(v) * (P(v) - f(v))| (weights
make it a relative error of the final function) by Lawson's iteratively
reweighted least squares on Chebyshev nodes, in 50-digit arithmetic (mpmath).
The coefficients are then rounded to float one at a time, lowest degree first,
refitting the remaining ones after each rounding so that later coefficients
absorb the rounding of earlier ones. The reported error is that of the
float-coefficient polynomial evaluated exactly (float evaluation adds its own
rounding, measured by tests/codegen/cpu_helpers_test.cpp).

Usage: python3 scripts/fit_cpu_math.py [name ...]   (default: all; names:
exp, log, tanh, erf, erfc, erfc_double, gelu_cuda, gelu_16bit). Prints the
coefficients, lowest degree first, as C++ hex-float literals, with the
achieved error. Needs mpmath; takes a few minutes.
"""
import struct
import sys

import mpmath as mp

mp.mp.dps = 50


def to_float(x):
    """Rounds an mpf to a float (binary32), through double: a double rounding
    is harmless here, the other coefficients are refitted around the float
    chosen."""
    return struct.unpack("f", struct.pack("f", float(x)))[0]


def chebyshev_nodes(lo, hi, count):
    return [(lo + hi) / 2 + (hi - lo) / 2 * mp.cos(mp.pi * (2 * i + 1) / (2 * count)) for i in range(count)]


def weighted_lsq(rows, targets, weights):
    """Solves min sum (w_i * (rows_i . c - t_i))^2 through the normal equations (50 digits)."""
    n = len(rows[0])
    a = mp.matrix(n, n)
    b = mp.matrix(n, 1)
    for row, t, w in zip(rows, targets, weights):
        w2 = w * w
        for i in range(n):
            wi = w2 * row[i]
            b[i] += wi * t
            for j in range(i, n):
                a[i, j] += wi * row[j]
    for i in range(n):
        for j in range(i):
            a[i, j] = a[j, i]
    return list(mp.lu_solve(a, b))


def minimax(f, weight, lo, hi, powers, fixed=None, nodes=None, iterations=40):
    """Coefficients c_k of sum_k c_k v^powers[k] minimising max |weight(v) (P(v) - f(v))|.

    fixed maps an index of `powers` to a value that is not fitted.
    """
    fixed = dict(fixed or {})
    xs = nodes or chebyshev_nodes(mp.mpf(lo), mp.mpf(hi), 12 * len(powers) + 60)
    fs = [f(x) for x in xs]
    ws = [weight(x) for x in xs]
    free = [k for k in range(len(powers)) if k not in fixed]
    rows = [[x ** powers[k] for k in free] for x in xs]
    targets = [fx - sum(fixed[k] * x ** powers[k] for k in fixed) for x, fx in zip(xs, fs)]
    lawson = [mp.mpf(1)] * len(xs)
    for _ in range(iterations):
        c = weighted_lsq(rows, targets, [w * mp.sqrt(l) for w, l in zip(ws, lawson)])
        errs = [abs(w * (sum(ck * r for ck, r in zip(c, row)) - t)) for row, t, w in zip(rows, targets, ws)]
        total = sum(l * e for l, e in zip(lawson, errs))
        lawson = [l * e / total for l, e in zip(lawson, errs)]
    coeffs = dict(fixed)
    for k, ck in zip(free, c):
        coeffs[k] = ck
    return [coeffs[k] for k in range(len(powers))]


def fit_float(f, weight, lo, hi, powers, fixed=None, iterations=25):
    """minimax(), then rounds coefficients to float one by one with refits."""
    fixed = {k: mp.mpf(to_float(v)) for k, v in (fixed or {}).items()}
    order = [k for k in range(len(powers)) if k not in fixed]
    for k in order:
        c = minimax(f, weight, lo, hi, powers, fixed, iterations=iterations)
        fixed[k] = mp.mpf(to_float(c[k]))
    return [fixed[k] for k in range(len(powers))]


def max_error(f, weight, lo, hi, powers, coeffs, samples=4000):
    worst, at = mp.mpf(0), None
    for i in range(samples + 1):
        x = mp.mpf(lo) + (mp.mpf(hi) - lo) * i / samples
        e = abs(weight(x) * (sum(c * x ** p for c, p in zip(coeffs, powers)) - f(x)))
        if e > worst:
            worst, at = e, x
    return worst, at


def report(name, f, weight, lo, hi, powers, coeffs, suffix="f"):
    err, at = max_error(f, weight, lo, hi, powers, coeffs)
    print(f"// {name}: v in [{mp.nstr(lo, 8)}, {mp.nstr(hi, 8)}], powers {powers}, "
          f"max weighted error {mp.nstr(err, 3)} = 2^{mp.nstr(mp.log(err, 2), 4)} at {mp.nstr(at, 6)}")
    print("  " + ", ".join(float(c).hex() + suffix for c in coeffs))


def series_guard(f, series, small):
    """f(x) with a Taylor series near 0, where the closed form divides by zero."""
    return lambda x: series(x) if abs(x) < small else f(x)


# exp(r) = 1 + r + r^2 Q(r) on |r| <= ln2/2 (a little wider for the rounding of
# n = round(x / ln2)); weight: relative error of exp.
def fit_exp():
    q = series_guard(lambda r: (mp.exp(r) - 1 - r) / r ** 2,
                     lambda r: mp.mpf(1) / 2 + r / 6 + r ** 2 / 24 + r ** 3 / 120 + r ** 4 / 720, mp.mpf("1e-12"))
    w = lambda r: r ** 2 / mp.exp(r)
    lo, hi = -mp.mpf("0.3467"), mp.mpf("0.3467")
    powers = [0, 1, 2, 3, 4]
    c = fit_float(q, w, lo, hi, powers)
    report("exp Q", q, w, lo, hi, powers, c)
    ln2 = mp.log(2)
    hi16 = mp.mpf(int(ln2 * 2 ** 16)) / 2 ** 16  # 16 significant bits: n * ln2_hi exact for |n| < 2^8
    print(f"  ln2_hi = {float(hi16).hex()}f, ln2_lo = {to_float(ln2 - hi16).hex()}f, "
          f"log2e = {to_float(1 / ln2).hex()}f")


# log(1 + f) = f + f^2 Q(f) for 1 + f in [sqrt(1/2), sqrt(2)); weight: relative error of log1p.
def fit_log(degree=8):
    s2 = mp.sqrt(2)
    lo, hi = 1 / s2 - 1, s2 - 1
    q = series_guard(lambda f: (mp.log1p(f) - f) / f ** 2,
                     lambda f: sum((-1) ** (k + 1) * f ** (k - 2) / k for k in range(2, 14)), mp.mpf("1e-12"))
    w = lambda f: f ** 2 / mp.log1p(f) if f != 0 else mp.mpf(0)
    powers = list(range(degree + 1))
    c = fit_float(q, w, lo - mp.mpf("1e-6"), hi + mp.mpf("1e-6"), powers, fixed={0: mp.mpf(-0.5)})
    report(f"log1p Q degree {degree}", q, w, lo, hi, powers, c)


# tanh(x) = x + x^3 P(x^2) for |x| < T; v = x^2; weight: relative error of tanh.
def fit_tanh(t=0.875, degree=6):
    y_hi = mp.mpf(t) ** 2
    p = series_guard(lambda y: (mp.tanh(mp.sqrt(y)) / mp.sqrt(y) - 1) / y,
                     lambda y: -mp.mpf(1) / 3 + 2 * y / 15 - 17 * y ** 2 / 315, mp.mpf("1e-15"))
    w = lambda y: y * mp.sqrt(y) / mp.tanh(mp.sqrt(y)) if y > 0 else mp.mpf(0)
    powers = list(range(degree + 1))
    c = fit_float(p, w, mp.mpf(0), y_hi, powers)
    report(f"tanh P (|x| < {t}), degree {degree}", p, w, mp.mpf(0), y_hi, powers, c)


# erf(x) = x + x P(x^2) for |x| < T; v = x^2; weight: relative error of erf.
# (Fitting erf(x)/x - 1 rather than erf(x)/x keeps the rounding of the
# constant term 2/sqrt(pi) - 1 small relative to the result.)
def fit_erf_small(t=1.0, degree=6):
    y_hi = mp.mpf(t) ** 2
    p = series_guard(lambda y: mp.erf(mp.sqrt(y)) / mp.sqrt(y) - 1,
                     lambda y: 2 / mp.sqrt(mp.pi) * (1 - y / 3 + y ** 2 / 10 - y ** 3 / 42) - 1, mp.mpf("1e-15"))
    w = lambda y: mp.sqrt(y) / mp.erf(mp.sqrt(y)) if y > 0 else mp.sqrt(mp.pi) / 2
    powers = list(range(degree + 1))
    c = fit_float(p, w, mp.mpf(0), y_hi, powers)
    report(f"erf P (|x| < {t}), degree {degree}", p, w, mp.mpf(0), y_hi, powers, c)


# erfc(a) = exp(-a^2) * G(t) / (a + k) with t = (a - k) / (a + k), for a in [0, A];
# G(t) = erfcx(a) (a + k); weight: relative error of erfc.
def fit_erfc(k=2.0, a_max=10.25, degree=11, show_sensitivity=True):
    k = mp.mpf(to_float(k))
    lo, hi = mp.mpf(-1), (a_max - k) / (a_max + k)
    a_of = lambda t: k * (1 + t) / (1 - t)
    g = lambda t: mp.erfc(a_of(t)) * mp.exp(a_of(t) ** 2) * (a_of(t) + k)
    w = lambda t: 1 / g(t)
    powers = list(range(degree + 1))
    c = fit_float(g, w, lo, hi, powers, iterations=20)
    report(f"erfc G (k = {mp.nstr(k, 6)}, a <= {a_max}), degree {degree}", g, w, lo, hi, powers, c)
    if show_sensitivity:
        # How much a relative error in t moves G: |t G'(t) / G(t)|.
        s = max(abs(t * mp.diff(g, t) / g(t)) for t in mp.linspace(lo, hi, 200))
        print(f"  max |t G'/G| = {mp.nstr(s, 3)}")


# The same G with double coefficients, for the double-precision erfc of gelu.
def fit_erfc_double(k=2.0, a_max=10.25, degree=11):
    k = mp.mpf(k)
    lo, hi = mp.mpf(-1), (a_max - k) / (a_max + k)
    a_of = lambda t: k * (1 + t) / (1 - t)
    g = lambda t: mp.erfc(a_of(t)) * mp.exp(a_of(t) ** 2) * (a_of(t) + k)
    w = lambda t: 1 / g(t)
    powers = list(range(degree + 1))
    c = [mp.mpf(float(ck)) for ck in minimax(g, w, lo, hi, powers, iterations=40)]
    report(f"erfc G in double (k = {mp.nstr(k, 6)}, a <= {a_max}), degree {degree}", g, w, lo, hi, powers, c, "")


# The CUDA gelu's erfc(a / sqrt 2) = 2^(a P(a)), a = |x| in [0, 4 sqrt 2]:
# P in a itself, so that no rounded a / sqrt 2 feeds the exponent (the
# exponent's slope reaches 12 there: a 2^-24 error in t would cost 50 ulp).
# Weight a: the absolute error of the exponent a P(a), i.e. (times ln 2) the
# relative error of erfc.
def fit_gelu_cuda(a_max=4 * mp.sqrt(2), degree=10):
    log2e = 1 / mp.log(2)
    r2 = mp.sqrt(2)
    p = series_guard(lambda a: mp.log(mp.erfc(a / r2)) * log2e / a,
                     lambda a: -mp.sqrt(2 / mp.pi) * log2e - a / mp.pi * log2e, mp.mpf("1e-20"))
    w = lambda a: a
    powers = list(range(degree + 1))
    c = fit_float(p, w, mp.mpf(0), mp.mpf(a_max), powers, iterations=12)
    report(f"CUDA gelu: log2(erfc(a / sqrt 2)) / a on [0, {mp.nstr(a_max, 6)}], degree {degree}", p, w, 0, a_max,
           powers, c)

FITS = {"exp": fit_exp, "log": fit_log, "tanh": fit_tanh, "erf": fit_erf_small, "erfc": fit_erfc, "erfc_double": fit_erfc_double,
        "gelu_cuda": fit_gelu_cuda,
        # The GeLU from which only 16-bit values are computed (CUDA and CPU
        # fj_gelu_none_16bit): the same function, degree 6, 2^-17.5.
        "gelu_16bit": lambda: fit_gelu_cuda(degree=6)}

if __name__ == "__main__":
    names = sys.argv[1:] or list(FITS)
    for name in names:
        FITS[name]()
