// matmul on the CPU: C[M, N] = A[M, K] . B[K, N] in f32, the work items
// being rows of C. For each block of kMB rows and panel of kNB columns, the
// k dimension is walked in blocks of kKB: the A block and B panel are
// converted to f32 into small buffers (B padded with zeros to kNB columns,
// so the innermost loop has a constant trip count and vectorizes), and
// accumulated into a kMB x kNB f32 block that stays in the L1/L2 cache.
// Sums run in increasing k, in f32, like a GPU GEMM without split-k.
#include "codegen/cpu/cpu_emit_common.h"
#include "codegen/expr.h"

namespace fusejit::cpu_emit {
namespace {

// The blocking: kMB rows of C by kNB columns, kKB deep.
constexpr int64_t kMatmulRows = 32, kMatmulCols = 128, kMatmulDepth = 256;

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
  out.count = k == 0 ? a.shape.numel() : a.shape.numel() / k;
  out.grain = 32;
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
  w.line("constexpr long long kMB = {}, kNB = {}, kKB = {};", kMatmulRows, kMatmulCols, kMatmulDepth);
  out.scratch_floats = kMatmulDepth * kMatmulCols + kMatmulRows * kMatmulCols + kMatmulRows * kMatmulDepth;
  w.line("float* const fj_buffer = fj_scratch;  // kKB * kNB + kMB * kNB + kMB * kKB floats");
  w.line("float* __restrict bp = fj_buffer;");
  w.line("float* __restrict acc = bp + kKB * kNB;");
  w.line("float* __restrict ap = acc + kMB * kNB;");
  const std::string pa = param_name(g, a_id), pb = param_name(g, b_id), pc = param_name(g, mm_id);
  w.open("for (long long i0 = begin; i0 < end; i0 += kMB)");
  w.line("const long long mb = end - i0 < kMB ? end - i0 : kMB;");
  w.open("for (long long j0 = 0; j0 < kN; j0 += kNB)");
  w.line("const long long nb = kN - j0 < kNB ? kN - j0 : kNB;");
  w.line("fj_fill_span(acc, 0.0f, kMB * kNB);");
  w.open("for (long long k0 = 0; k0 < kK; k0 += kKB)");
  w.line("const long long kb = kK - k0 < kKB ? kK - k0 : kKB;");
  w.open("for (long long k = 0; k < kb; ++k)");
  w.line("fj_load_span({} + (k0 + k) * kN + j0, bp + k * kNB, nb);", pb);
  w.line("fj_fill_span(bp + k * kNB + nb, 0.0f, kNB - nb);");
  w.close();
  w.line("for (long long i = 0; i < mb; ++i) fj_load_span({} + (i0 + i) * kK + k0, ap + i * kKB, kb);", pa);
  w.open("for (long long i = 0; i < mb; ++i)");
  w.line("float* __restrict c = acc + i * kNB;");
  w.open("for (long long k = 0; k < kb; ++k)");
  w.line("const float aik = ap[i * kKB + k];");
  w.line("const float* __restrict bk = bp + k * kNB;");
  w.line("for (long long j = 0; j < kNB; ++j) c[j] += aik * bk[j];");
  w.close();
  w.close();
  w.close();
  w.line("for (long long i = 0; i < mb; ++i) fj_store_span({} + (i0 + i) * kN + j0, acc + i * kNB, nb);", pc);
  w.close();
  w.close();
  w.line("return 0;");
  w.close();
  out.source = w.text();
  return out;
}

}  // namespace fusejit::cpu_emit
