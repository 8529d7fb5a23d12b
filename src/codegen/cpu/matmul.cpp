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
// has them, as a GPU GEMM without split-k does.
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
               fmt::format("matmul [{}, {}] x [{}, {}] in f32, blocked for the cache", out.count, k, k, n));
  write_helpers(w);
  w.blank();
  open_entry(w, *plan.graph, kernel, out.params);
  w.line("constexpr long long kK = {}, kN = {};", k, n);
  w.line("constexpr long long kMB = {}, kNB = {}, kKB = {}, kMR = {}, kNR = 2 * kFjVecLanes;", kMatmulRows,
         kMatmulCols, kMatmulDepth, kMicroRows);
  w.line("static_assert(kMB % kMR == 0 && kNB % kNR == 0, \"the blocks hold whole tiles\");");
  out.scratch_floats = kMatmulDepth * kMatmulCols + kMatmulRows * kMatmulCols + kMatmulRows * kMatmulDepth;
  w.line("float* const fj_buffer = fj_scratch;  // kKB * kNB + kMB * kNB + kMB * kKB floats");
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
  w.open("for (long long k0 = 0; k0 < kK; k0 += kKB)");
  w.line("const long long kb = kK - k0 < kKB ? kK - k0 : kKB;");
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
  w.line("float* __restrict c = acc + s * kMR * kNB + p * kNR;");
  w.line("const float* __restrict a = ap + s * kb * kMR;");
  w.line("const float* __restrict b = bp + p * kb * kNR;");
  std::string declare = "fj_vec";
  for (int r = 0; r < kMicroRows; ++r) {
    declare += fmt::format("{} c{}0, c{}1", r == 0 ? "" : ",", r, r);
  }
  w.line("{};", declare);
  w.open("if (k0 == 0)");
  for (int r = 0; r < kMicroRows; ++r) w.line("c{0}0 = fj_vec_splat(0.0f); c{0}1 = c{0}0;", r);
  w.close();
  w.open("else");
  for (int r = 0; r < kMicroRows; ++r) {
    w.line("__builtin_memcpy(&c{0}0, c + {0} * kNB, sizeof(fj_vec)); "
           "__builtin_memcpy(&c{0}1, c + {0} * kNB + kFjVecLanes, sizeof(fj_vec));",
           r);
  }
  w.close();
  w.open("for (long long k = 0; k < kb; ++k)");
  w.line("fj_vec b0, b1;");
  w.line("__builtin_memcpy(&b0, b + k * kNR, sizeof(fj_vec));");
  w.line("__builtin_memcpy(&b1, b + k * kNR + kFjVecLanes, sizeof(fj_vec));");
  for (int r = 0; r < kMicroRows; ++r) {
    w.line("{{ const fj_vec x = fj_vec_splat(a[k * kMR + {0}]); c{0}0 = fj_vec_fma(x, b0, c{0}0); "
           "c{0}1 = fj_vec_fma(x, b1, c{0}1); }}",
           r);
  }
  w.close();
  for (int r = 0; r < kMicroRows; ++r) {
    w.line("__builtin_memcpy(c + {0} * kNB, &c{0}0, sizeof(fj_vec)); "
           "__builtin_memcpy(c + {0} * kNB + kFjVecLanes, &c{0}1, sizeof(fj_vec));",
           r);
  }
  w.close();
  w.close();
  w.close();
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
