// matmul on the CPU: C[M, N] = A[M, K] . B[K, N] in f32, the work items
// being rows of C. The loops of a BLIS-style GEMM: for each block of kMB
// rows and kNB columns of C, the k dimension is walked in blocks of kKB;
// the B block is packed (converted to f32) into panels kNR columns wide and
// the A block into slivers kMR rows high, both padded with zeros, and a
// register-blocked micro-kernel multiplies a sliver by a panel: kMR x kNR
// sums held in 2 kMR vector registers, one broadcast of A and two vectors
// of B per k. The f32 block of C stays in the cache across the k blocks and
// is converted to C's type once at the end. Each element of C sums its
// products in increasing k, in f32, with fused multiply-adds where the CPU
// has them, as a GPU GEMM without split-k does. Two bf16 operands, where
// the CPU has AVX512-BF16, are packed as pairs and multiplied two k at a
// time by dot-product instructions instead (write_bf16_pair_blocks).
//
// An epilogue (fusion/matmul_epilogue.h) runs over each block of C in f32
// after its last k block, while the block is in the cache, and the block is
// rounded to C's type once, after it: the bias-added (and activated) value
// is what leaves the kernel, and the product is never stored.
//
// An earlier version added into a row of the C block in memory for every k
// (a load and a store per vector multiply-add): 69 GFLOP/s on two Xeon
// cores where the FMA units peak at 450, and PyTorch's mlp_block ran 4x
// faster (bench/results/2026-12-01-cpu-intel.md).
#include <algorithm>
#include <cmath>

#include <fmt/ranges.h>

#include "codegen/cpu/cpu_emit_common.h"
#include "codegen/expr.h"
#include "fusion/matmul_epilogue.h"

namespace fusejit::cpu_emit {
namespace {

// The blocking: kMB rows of C by kNB columns, kKB deep; the micro-kernel's
// tile is kMR rows by kNR = 2 vectors. kMB and kNB are multiples of the
// tile (kNB of 2 x 16 lanes, the widest vectors).
constexpr int64_t kMatmulRows = kCpuMatmulRowBlock, kMatmulCols = 256, kMatmulDepth = 256, kMicroRows = 6;
// Rows of B packed together (see the packing loop).
constexpr int64_t kPackRows = 8;

// The epilogue over the block of C in `acc` (mb rows of nb columns from
// column j0), in f32, each op's expression from the op table.
void write_epilogue(SourceWriter& w, const Graph& g, const Kernel& kernel, const MatmulEpilogue& epilogue) {
  std::vector<std::string> steps;
  for (size_t i = 1; i < kernel.nodes.size(); ++i) steps.push_back(g.node(kernel.nodes[i]).name);
  w.line("// The epilogue ({}) over the block, in f32, before it is rounded and stored.", fmt::join(steps, ", "));
  w.open("for (long long i = 0; i < mb; ++i)");
  w.line("float* __restrict row = acc + i * kNB;");
  w.open("for (long long j = 0; j < nb; ++j)");
  std::string value = "row[j]";
  for (size_t i = 1; i < kernel.nodes.size(); ++i) {
    const int32_t id = kernel.nodes[i];
    const Node& n = g.node(id);
    std::vector<std::string> operands;
    for (const Operand& o : n.operands) {
      if (o.is_literal()) {
        operands.emplace_back();  // node_expression prints literals
      } else if (o.node == epilogue.bias) {
        operands.push_back(fmt::format("fj_to_float({}[j0 + j])", param_name(g, o.node)));
      } else {
        operands.push_back(value);
      }
    }
    const std::string local = fmt::format("v{}", i);
    w.line("const float {} = {};  // {}", local, node_expression(g, id, operands, "0"), n.name);
    value = local;
  }
  w.line("row[j] = {};", value);
  w.close();
  w.close();
}

// The tile's kMR x kNR sums in 2 kMR vector registers around `step`, which
// writes one k step's multiply-adds: zeros at the first k block, else the
// sums so far from the C block, and back to it after the block's last k.
template <typename Step>
void write_tile(SourceWriter& w, const char* steps, const char* first, Step step) {
  std::string declare = "fj_vec";
  for (int r = 0; r < kMicroRows; ++r) declare += fmt::format("{} c{}0, c{}1", r == 0 ? "" : ",", r, r);
  w.line("{};", declare);
  w.open("if ({})", first);
  for (int r = 0; r < kMicroRows; ++r) w.line("c{0}0 = fj_vec_splat(0.0f); c{0}1 = c{0}0;", r);
  w.close();
  w.open("else");
  for (int r = 0; r < kMicroRows; ++r) {
    w.line(
        "__builtin_memcpy(&c{0}0, c + {0} * kNB, sizeof(fj_vec)); "
        "__builtin_memcpy(&c{0}1, c + {0} * kNB + kFjVecLanes, sizeof(fj_vec));",
        r);
  }
  w.close();
  w.open("for (long long k = 0; k < {}; ++k)", steps);
  step();
  w.close();
  for (int r = 0; r < kMicroRows; ++r) {
    w.line(
        "__builtin_memcpy(c + {0} * kNB, &c{0}0, sizeof(fj_vec)); "
        "__builtin_memcpy(c + {0} * kNB + kFjVecLanes, &c{0}1, sizeof(fj_vec));",
        r);
  }
}

// One k block (k0, kb deep) of one block of C with f32 multiply-adds: B
// and A packed (converted to f32), then the micro-kernel over every tile,
// adding into `target` (acc, or the bf16 path's fix), whose sums start at
// zero where `first` holds.
void write_f32_k_block(SourceWriter& w, const std::string& pa, const std::string& pb, const char* target,
                       const char* first) {
  // kPackRows rows of B at a time, panel by panel, so that each panel's
  // lines are written one after another. A row at a time wrote the
  // panels' lines 16 KiB apart (one per panel, all in one L1 set), and
  // packing a 1024 x 1024 B took 2.4x as long (650 against 270 us from
  // memory on one AMD EPYC thread): it dominated a 16-row GEMM
  // (bench/results/2026-12-06-cpu-matmul-packing.md).
  w.line("// Pack B[k0 .., j0 ..] into panels, zeros beyond column nb: {} rows of B at a time, panel by panel.",
         kPackRows);
  w.open("for (long long kg = 0; kg < kb; kg += {})", kPackRows);
  w.line("const long long rows = kb - kg < {0} ? kb - kg : {0};", kPackRows);
  w.open("for (long long p = 0; p < panels; ++p)");
  w.line("const long long cols = nb - p * kNR < kNR ? nb - p * kNR : kNR;");
  w.open("for (long long r = 0; r < rows; ++r)");
  w.line("const auto* __restrict src = {} + (k0 + kg + r) * kN + j0 + p * kNR;", pb);
  w.line("float* __restrict dst = bp + (p * kb + kg + r) * kNR;");
  w.line("if (cols == kNR) for (long long c = 0; c < kNR; ++c) dst[c] = fj_to_float(src[c]);");
  w.line("else for (long long c = 0; c < kNR; ++c) dst[c] = c < cols ? fj_to_float(src[c]) : 0.0f;");
  w.close();
  w.close();
  w.close();
  w.line("// Pack A[i0 .., k0 ..] into slivers, zeros beyond row mb.");
  w.open("for (long long s = 0; s < slivers; ++s)");
  w.open("for (long long r = 0; r < kMR; ++r)");
  w.line("const long long i = s * kMR + r;");
  w.line("float col[kKB];");
  w.line("if (i < mb) fj_load_span({} + (i0 + i) * kK + k0, col, kb);", pa);
  w.line("else for (long long k = 0; k < kb; ++k) col[k] = 0.0f;");
  w.line("for (long long k = 0; k < kb; ++k) ap[(s * kb + k) * kMR + r] = col[k];");
  w.close();
  w.close();
  w.line("// The micro-kernel over every tile: its sums live in registers for the whole k block.");
  w.line("// Panels outside, slivers inside: a panel (kKB x kNR floats, 32 KiB at most) stays in");
  w.line("// the L1 cache while every sliver of A passes it, as in BLIS.");
  w.open("for (long long p = 0; p < panels; ++p)");
  w.open("for (long long s = 0; s < slivers; ++s)");
  w.line("float* __restrict c = {} + s * kMR * kNB + p * kNR;", target);
  w.line("const float* __restrict a = ap + s * kb * kMR;");
  w.line("const float* __restrict b = bp + p * kb * kNR;");
  write_tile(w, "kb", first, [&] {
    w.line("fj_vec b0, b1;");
    w.line("__builtin_memcpy(&b0, b + k * kNR, sizeof(fj_vec));");
    w.line("__builtin_memcpy(&b1, b + k * kNR + kFjVecLanes, sizeof(fj_vec));");
    for (int r = 0; r < kMicroRows; ++r) {
      w.line(
          "{{ const fj_vec x = fj_vec_splat(a[k * kMR + {0}]); c{0}0 = fj_vec_fma(x, b0, c{0}0); "
          "c{0}1 = fj_vec_fma(x, b1, c{0}1); }}",
          r);
    }
  });
  w.close();
  w.close();
}

// The k blocks of one block of C with f32 multiply-adds.
void write_f32_blocks(SourceWriter& w, const std::string& pa, const std::string& pb) {
  w.open("for (long long k0 = 0; k0 < kK; k0 += kKB)");
  w.line("const long long kb = kK - k0 < kKB ? kK - k0 : kKB;");
  write_f32_k_block(w, pa, pb, "acc", "k0 == 0");
  w.close();
}

// The bf16 path's packing of B into pairs (k in the high half), noting
// B's smallest exponent and any infinity; then the thresholds tb and ta,
// and B's tiny values taken out of the pairs (write_bf16_pair_blocks).
void write_bf16_pack_b(SourceWriter& w, const std::string& pb) {
  w.line("// B's smallest biased exponent of a nonzero value, and any infinity in B or A.");
  w.line("unsigned b_low = 255, infinities = 0;");
  w.line("// Pack B[k0 .., j0 ..] into panels of pairs, zeros beyond column nb and row kK: {} pairs at a time.",
         kPackRows / 2);
  w.open("for (long long kg = 0; kg < kb2; kg += {})", kPackRows / 2);
  w.line("const long long pairs = kb2 - kg < {0} ? kb2 - kg : {0};", kPackRows / 2);
  w.open("for (long long p = 0; p < panels; ++p)");
  w.line("const long long cols = nb - p * kNR < kNR ? nb - p * kNR : kNR;");
  w.open("for (long long r = 0; r < pairs; ++r)");
  w.line("const long long k = k0 + 2 * (kg + r);");
  w.line("const fj_bf16* __restrict lo = {} + k * kN + j0 + p * kNR;", pb);
  w.line("const fj_bf16* __restrict hi = k + 1 < kK ? lo + kN : nullptr;");
  w.line("unsigned* __restrict dst = bp2 + (p * kb2 + kg + r) * kNR;");
  // A whole panel of two rows, the common case, in a loop without
  // conditions; else zeros beyond column nb and row kK.
  for (const char* pair :
       {"lo[c].bits, h = hi[c].bits", "c < cols ? lo[c].bits : 0u, h = c < cols && hi != nullptr ? hi[c].bits : 0u"}) {
    const bool whole = pair[0] == 'l';
    w.open("{}", whole ? "if (cols == kNR && hi != nullptr)" : "else");
    w.open("for (long long c = 0; c < kNR; ++c)");
    w.line("const unsigned l = {};", pair);
    // A plain minimum, which the compiler vectorizes; a review found the
    // conditional form left this loop scalar and the GEMM 3x slower.
    w.line("const unsigned el = fj_bf16_exponent_of_nonzero(l), eh = fj_bf16_exponent_of_nonzero(h);");
    w.line("b_low = el < b_low ? el : b_low;");
    w.line("b_low = eh < b_low ? eh : b_low;");
    w.line("infinities |= fj_bf16_infinite(l) | fj_bf16_infinite(h);");
    w.line("dst[c] = h | l << 16;  // row k in the high half: added first");
    w.close();
    w.close();
  }
  w.close();
  w.close();
  w.close();
  w.line("const unsigned tb = b_low < 71 ? 71 : b_low, ta = tb >= 141 ? 1 : 142 - tb;");
  w.line("unsigned a_tiny = 0, b_tiny = 0;  // tiny values of A and of B");
  w.open("if (b_low < tb)");
  w.line("// B's tiny values out of the dot products (weights rarely have any).");
  w.open("for (long long i = 0; i < panels * kb2 * kNR; ++i)");
  w.line("const unsigned v = bp2[i], h = v >> 16, l = v & 0xffffu;");
  w.line("const unsigned th = fj_bf16_tiny(h, tb), tl = fj_bf16_tiny(l, tb);");
  w.line("b_tiny += th + tl;");
  w.line("bp2[i] = (th ? 0u : h << 16) | (tl ? 0u : l);");
  w.close();
  w.close();
}

// The bf16 path's packing of A into pairs, its tiny values zero, noting
// each row's count of them and any infinity.
void write_bf16_pack_a(SourceWriter& w, const std::string& pa) {
  w.line("unsigned row_tiny[kMB];");
  w.line("// Pack A[i0 .., k0 ..] into slivers of pairs, zeros beyond row mb and column kK, and for tiny values.");
  w.open("for (long long s = 0; s < slivers; ++s)");
  w.open("for (long long r = 0; r < kMR; ++r)");
  w.line("const long long i = s * kMR + r;");
  w.line("unsigned* __restrict dst = ap2 + s * kb2 * kMR + r;");
  w.open("if (i < mb)");
  w.line("const fj_bf16* __restrict row = {} + (i0 + i) * kK + k0;", pa);
  // The notes in a loop of their own over the row, which the compiler
  // vectorizes; with them in the packing loop, whose stores are kMR apart
  // and scalar, mlp_block's first GEMM took 1.4x as long.
  w.line("unsigned count = 0;");
  w.open("for (long long k = 0; k < kb; ++k)");
  w.line("count += fj_bf16_tiny(row[k].bits, ta);");
  w.line("infinities |= fj_bf16_infinite(row[k].bits);");
  w.close();
  w.line("row_tiny[i] = count;");
  w.line("a_tiny += count;");
  w.line("// Column k in the high half, as in B: the word of columns k and k + 1 turned by 16 bits.");
  w.open("for (long long k = 0; k < kb / 2; ++k)");
  w.line("unsigned v;");
  w.line("__builtin_memcpy(&v, row + 2 * k, sizeof v);");
  w.line("const unsigned l = v & 0xffffu, h = v >> 16;");
  w.line(
      "dst[k * kMR] = (count != 0 && fj_bf16_tiny(l, ta) ? 0u : l << 16) | (count != 0 && fj_bf16_tiny(h, ta) ? 0u : "
      "h);");
  w.close();
  w.line("const unsigned last = kb % 2 != 0 ? row[kb - 1].bits : 0u;");
  w.line("if (kb % 2 != 0) dst[(kb2 - 1) * kMR] = fj_bf16_tiny(last, ta) ? 0u : last << 16;");
  w.close();
  w.open("else");
  w.line("for (long long k = 0; k < kb2; ++k) dst[k * kMR] = 0;");
  w.close();
  w.close();
  w.close();
}

// A k block the bf16 path leaves to the f32 path, into acc; then acc keeps
// only multiples of 2^-126, the exact remainder going to fix.
void write_bf16_fallback(SourceWriter& w, const std::string& pa, const std::string& pb) {
  w.line("const unsigned tiny = a_tiny + b_tiny;");
  w.line("// A tiny value beside an infinity, or tiny values by the thousand (B's weighed by the mb");
  w.line("// scalar additions each costs, A's by a vector row): the f32 path, into acc in increasing k;");
  w.line("// then any element of acc below 2^-102 keeps its multiple of 2^-126 there, and the rest,");
  w.line("// exact, goes to fix, so that later dot products meet no subnormal sum.");
  w.open("if (tiny != 0 && (infinities != 0 || a_tiny + b_tiny * (mb / 8 + 1) > 8 * kb))");
  write_f32_k_block(w, pa, pb, "acc", "!acc_started");
  w.line("acc_started = true;");
  w.open("for (long long i = 0; i < mb; ++i)");
  w.open("for (long long j = 0; j < nb; ++j)");
  w.line("const float v = acc[i * kNB + j];");
  w.line("if (!(v > -0x1p-102f && v < 0x1p-102f)) continue;");
  w.line("const float kept = __builtin_truncf(v * 0x1p126f) * 0x1p-126f;");
  w.line("if (kept == v) continue;");
  w.line("start_fix();");
  w.line("acc[i * kNB + j] = kept;");
  w.line("fix[i * kNB + j] += v - kept;");
  w.close();
  w.close();
  w.line("continue;");
  w.close();
}

// The dot products of one k block over every tile, into acc.
void write_bf16_dot_tiles(SourceWriter& w) {
  w.line("// The micro-kernel over every tile, two k per step.");
  w.open("for (long long p = 0; p < panels; ++p)");
  w.open("for (long long s = 0; s < slivers; ++s)");
  w.line("float* __restrict c = acc + s * kMR * kNB + p * kNR;");
  w.line("const unsigned* __restrict a = ap2 + s * kb2 * kMR;");
  w.line("const unsigned* __restrict b = bp2 + p * kb2 * kNR;");
  write_tile(w, "kb2", "!acc_started", [&] {
    w.line("fj_vec b0, b1;");
    w.line("__builtin_memcpy(&b0, b + k * kNR, sizeof(fj_vec));");
    w.line("__builtin_memcpy(&b1, b + k * kNR + kFjVecLanes, sizeof(fj_vec));");
    for (int r = 0; r < kMicroRows; ++r) {
      w.line("fj_dot_bf16_pairs(c{0}0, a + k * kMR + {0}, b0); fj_dot_bf16_pairs(c{0}1, a + k * kMR + {0}, b1);", r);
    }
  });
  w.close();
  w.close();
  w.line("acc_started = true;");
}

// The products of the k block's tiny values, in f32, into fix.
void write_bf16_tiny_products(SourceWriter& w, const std::string& pa, const std::string& pb) {
  w.line("// The products of tiny values, in f32, into fix: A's along their row (only rows that hold");
  w.line("// one are searched, up to their last), with all of B's row; then B's down their column,");
  w.line("// with A's values that are not tiny (a product of two tiny ones is counted once).");
  w.line("start_fix();");
  w.open("for (long long i = 0; i < mb; ++i)");
  w.line("const fj_bf16* __restrict row = {} + (i0 + i) * kK + k0;", pa);
  w.line("float* __restrict fi = fix + i * kNB;");
  w.line("unsigned left = row_tiny[i];");
  w.line("// The row's tiny values found 32 at a time by a mask of them (fj_bf16_tiny_mask32), the");
  w.line("// last values of a depth not a multiple of 32 one by one: mlp_block's hidden layer has");
  w.line("// a few in nearly every row, and searching them value by value took a third of its");
  w.line("// second GEMM.");
  w.open("for (long long k32 = 0; left != 0 && k32 < kb; k32 += 32)");
  w.line("unsigned found = 0;");
  w.open("if (k32 + 32 <= kb)");
  w.line("found = fj_bf16_tiny_mask32(row + k32, ta);");
  w.close();
  w.open("else");
  w.line("for (long long b = 0; k32 + b < kb; ++b) found |= fj_bf16_tiny(row[k32 + b].bits, ta) << b;");
  w.close();
  w.open("for (; found != 0; found &= found - 1)");
  w.line("const long long k = k32 + __builtin_ctz(found);");
  w.line("--left;");
  w.line("const float x = fj_to_float(row[k]);");
  w.line("const fj_bf16* __restrict brow = {} + (k0 + k) * kN + j0;", pb);
  w.line("for (long long j = 0; j < nb; ++j) fi[j] += x * fj_to_float(brow[j]);");
  w.close();
  w.close();
  w.close();
  w.open("if (b_low < tb)");
  w.open("for (long long k = 0; k < kb; ++k)");
  w.line("const fj_bf16* __restrict brow = {} + (k0 + k) * kN + j0;", pb);
  w.open("for (long long j = 0; j < nb; ++j)");
  w.line("if (!fj_bf16_tiny(brow[j].bits, tb)) continue;");
  w.line("const float y = fj_to_float(brow[j]);");
  w.open("for (long long i = 0; i < mb; ++i)");
  w.line("const fj_bf16 x = {}[(i0 + i) * kK + k0 + k];", pa);
  w.line("if (!fj_bf16_tiny(x.bits, ta)) fix[i * kNB + j] += fj_to_float(x) * y;");
  w.close();
  w.close();
  w.close();
  w.close();
}

// The same k blocks for two bf16 operands where the CPU has AVX512-BF16
// (FJ_BF16_DOT, fj_kernel.h): B and A are packed as pairs of bf16 values
// of consecutive k in one 32-bit word (rows k and k + 1 of B at a column;
// columns k and k + 1 of a row of A), unconverted, a zero completing the
// last pair of an odd depth, and each step of the micro-kernel is one
// vdpbf16ps per pair of vectors: two k at a time, at about twice the
// multiply-adds per second and half the packed bytes. The instruction adds
// the product of the pair's high halves first, so k goes there: the sums
// are the f32 path's, in increasing k (a review found k + 1 added first,
// which overflowed M + M - M, M the largest bf16, where the f32 path did not).
//
// vdpbf16ps reads subnormal inputs, and a subnormal f32 accumulator, as
// zero and flushes subnormal results to zero, which IEEE arithmetic (the
// f32 path, the reference) does not: a probe and two reviews found
// 2^-130 x 2^100 giving 0 for 2^-30, 2^-64 x 2^-64 summed giving 0 for
// 2^-120, and a subnormal sum of one k block dropped by the next. So no
// value the instruction sees is ever subnormal:
// - A value of B of biased exponent below tb, or of A below ta, is "tiny":
//   packed as zero, its products added in f32 apart. With ta + tb >= 142
//   every other value is a multiple of 2^(ta - 134) or 2^(tb - 134), each
//   product in the dot products a multiple of 2^-126, and so is every sum
//   of them, exact or rounded to f32: nonzero, it is at least 2^-126,
//   never subnormal. tb is the smallest exponent of B's nonzero values (no
//   value of B tiny: weights rarely are), at least 71; ta is 142 - tb, at
//   least 1 (a subnormal is always tiny). For mlp_block's second GEMM,
//   weights down to about 2^-17 leave the GeLU's tail below about 2^-96
//   tiny: 1-2% of its values.
// - The products of tiny values go to `fix`, an f32 block of their own
//   added to C at the end: C holds only multiples of 2^-126.
// - A k block that holds a tiny value beside an infinity (0 x inf is NaN,
//   where the reference has an infinity), or tiny values by the thousand
//   (more than 8 per k, B's weighed by the mb scalar additions each
//   costs), is multiplied by the f32 path into C, in increasing k (into
//   `fix` a sum near the largest float overflowed where the f32 path's did
//   not: a review), and then each element of C below 2^-102 keeps its
//   multiple of 2^-126 in C, the remainder, exact, going to `fix`.
void write_bf16_pair_blocks(SourceWriter& w, const std::string& pa, const std::string& pb) {
  w.line("static_assert(kFjVecLanes == 16, \"AVX512-BF16 implies AVX-512F: 16 f32 lanes\");");
  w.line("// Regions of their own, after the f32 path's: a k block may take either path, and two");
  w.line("// views of one region, unsigned and float, would let the compiler reorder their stores.");
  w.line("unsigned* __restrict bp2 = reinterpret_cast<unsigned*>(ap + kMB * kKB);  // kb2 x kNR pairs per panel");
  w.line("unsigned* __restrict ap2 = bp2 + kKB / 2 * kNB;  // kb2 x kMR pairs per sliver");
  w.line("float* __restrict fix = reinterpret_cast<float*>(ap2 + kMB * kKB / 2);  // kMB x kNB, as acc");
  w.line("bool acc_started = false, fix_started = false;  // whether acc and fix hold sums");
  w.line("const auto start_fix = [&] {{ if (!fix_started) fj_fill_span(fix, 0.0f, kMB * kNB); fix_started = true; }};");
  w.open("for (long long k0 = 0; k0 < kK; k0 += kKB)");
  w.line("const long long kb = kK - k0 < kKB ? kK - k0 : kKB;");
  w.line("const long long kb2 = (kb + 1) / 2;  // pairs of k");
  write_bf16_pack_b(w, pb);
  write_bf16_pack_a(w, pa);
  write_bf16_fallback(w, pa, pb);
  write_bf16_dot_tiles(w);
  w.open("if (tiny != 0)");
  write_bf16_tiny_products(w, pa, pb);
  w.close();
  w.close();  // the k blocks
  w.line("// C is the dot products' sums plus fix's.");
  w.open("if (fix_started)");
  w.line("if (!acc_started) fj_fill_span(acc, 0.0f, kMB * kNB);");
  w.line("for (long long i = 0; i < mb; ++i) for (long long j = 0; j < nb; ++j) acc[i * kNB + j] += fix[i * kNB + j];");
  w.close();
}

}  // namespace

CpuKernelSource emit_matmul(const FusionPlan& plan, const Kernel& kernel) {
  const Graph& g = *plan.graph;
  const int32_t mm_id = kernel.nodes.at(0);
  const Node& mm = g.node(mm_id);
  const int32_t a_id = mm.operands.at(0).node, b_id = mm.operands.at(1).node;
  const Node& a = g.node(a_id);
  const Node& b = g.node(b_id);
  const int64_t k = a.shape.last();
  const int64_t n = b.shape.last();
  // Two bf16 operands take the dot-product path where the compiler targets
  // AVX512-BF16, the f32 path elsewhere: the source holds both.
  const bool bf16_pairs = a.dtype == DType::kBF16 && b.dtype == DType::kBF16;
  CpuKernelSource out;
  out.name = kernel.name;
  out.variant = CpuVariant::kMatmul;
  out.params = kernel_params(plan, kernel);
  const CpuWorkSplit split = cpu_work_split(g, kernel);
  out.count = split.count;
  out.grain = split.grain;
  SourceWriter w;
  if (kernel.writes.empty()) {
    // A matmul whose result nothing uses (the plan keeps every user op):
    // there is nothing to store, so nothing to compute.
    write_header(w, plan, kernel, "matmul whose result is unused: does nothing");
    write_helpers(w);
    open_entry(w, *plan.graph, kernel, out.params);
    w.line("return 0;");
    w.close();
    out.source = w.text();
    return out;
  }
  write_header(w, plan, kernel,
               fmt::format("matmul [{}, {}] x [{}, {}] in f32{}, blocked for the cache", out.count, k, k, n,
                           bf16_pairs ? " (bf16 pairs by dot products where the CPU has AVX512-BF16)" : ""));
  write_helpers(w);
  w.blank();
  open_entry(w, *plan.graph, kernel, out.params);
  w.line("constexpr long long kK = {}, kN = {};", k, n);
  w.line("constexpr long long kMB = {}, kNB = {}, kKB = {}, kMR = {}, kNR = 2 * kFjVecLanes;", kMatmulRows,
         kMatmulCols, kMatmulDepth, kMicroRows);
  w.line("static_assert(kMB % kMR == 0 && kNB % kNR == 0, \"the blocks hold whole tiles\");");
  out.scratch_floats = kMatmulDepth * kMatmulCols + kMatmulRows * kMatmulCols + kMatmulRows * kMatmulDepth;
  // The pairs of the bf16 path (half as many words as B's and A's floats)
  // and its block of f32 sums apart (fix).
  if (bf16_pairs) {
    out.scratch_floats += (kMatmulDepth * kMatmulCols + kMatmulRows * kMatmulDepth) / 2 + kMatmulRows * kMatmulCols;
  }
  w.line("float* const fj_buffer = fj_scratch;  // kKB * kNB + kMB * kNB + kMB * kKB floats{}",
         bf16_pairs ? ", then the bf16 path's pairs" : "");
  w.line("float* __restrict bp = fj_buffer;       // B block: kNB / kNR panels of kb x kNR");
  w.line("float* __restrict acc = bp + kKB * kNB;  // C block: kMB x kNB, row-major");
  w.line("float* __restrict ap = acc + kMB * kNB;  // A block: kMB / kMR slivers of kb x kMR");
  const std::string pa = param_name(g, a_id), pb = param_name(g, b_id);
  w.open("for (long long i0 = begin; i0 < end; i0 += kMB)");
  w.line("const long long mb = end - i0 < kMB ? end - i0 : kMB;");
  w.line("const long long slivers = (mb + kMR - 1) / kMR;");
  w.open("for (long long j0 = 0; j0 < kN; j0 += kNB)");
  w.line("const long long nb = kN - j0 < kNB ? kN - j0 : kNB;");
  w.line("const long long panels = (nb + kNR - 1) / kNR;");
  if (k == 0) w.line("fj_fill_span(acc, 0.0f, kMB * kNB);  // no k: C is zeros");
  if (bf16_pairs) {
    w.line("#if FJ_BF16_DOT");
    write_bf16_pair_blocks(w, pa, pb);
    w.line("#else");
  }
  write_f32_blocks(w, pa, pb);
  if (bf16_pairs) w.line("#endif");
  const int32_t stored = kernel.nodes.back();  // the product, or the epilogue's last value
  if (const MatmulEpilogue epilogue = matmul_epilogue(g, kernel); !epilogue.empty()) {
    write_epilogue(w, g, kernel, epilogue);
  }
  w.line("for (long long i = 0; i < mb; ++i) fj_store_span({} + (i0 + i) * kN + j0, acc + i * kNB, nb);",
         param_name(g, stored));
  w.close();
  w.close();
  w.line("return 0;");
  w.close();
  out.source = w.text();
  return out;
}

}  // namespace fusejit::cpu_emit
