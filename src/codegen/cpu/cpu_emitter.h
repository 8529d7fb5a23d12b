// C++ for the kernels of a fusion plan, compiled on the host at run time
// (runtime/host_compiler.h) into a shared object per kernel.
//
// Every kernel is one entry point with the same signature,
//
//   extern "C" int NAME(void* const* args, long long begin, long long end, float* fj_scratch);
//
// args: one pointer per KernelParam (reads, then writes, then the dropout
// seeds as an array of unsigned long long). The kernel does
// the work items [begin, end) of `count`: elements for a pointwise kernel,
// rows for a row kernel and for a matmul (rows of the result). The runtime
// splits [0, count) across threads, so a kernel never starts threads itself.
// fj_scratch: `scratch_floats` floats, 64-byte aligned, for the calling
// thread alone (row kernels' arrays, matmul's blocks; null when
// scratch_floats is 0). The runtime keeps it from call to call
// (runtime/worker_scratch.h), so a kernel allocates nothing. It returns 0.
//
// Generated loops are written for the compiler's auto-vectorizer: a chain
// of elementwise ops is one simple loop over a tile (or a row), its values
// in registers and only those needed elsewhere in small f32 arrays
// (codegen/cpu/element_loops.h), with the math of src/codegen/cpu/fj_*.h,
// which is branch-free so that it vectorizes.
// Memory is touched once per tensor per tile, as in the CUDA kernels; the
// arrays stay in the L1/L2 cache.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "codegen/kernel_source.h"
#include "fusion/cpu_output_stores.h"

namespace fusejit {

enum class CpuVariant : uint8_t {
  kPointwise,  // tiles of up to kCpuTile elements of the iteration space
  kRow,        // one row at a time, each row-shaped value an array of the row's length
  kMatmul,     // a register-blocked f32 matmul over a band of result rows
};
std::string_view cpu_variant_name(CpuVariant v);

struct CpuKernelSource {
  std::string name;    // the extern "C" entry point
  std::string source;  // a complete C++17 translation unit (helpers embedded)
  CpuVariant variant = CpuVariant::kPointwise;
  std::vector<KernelParam> params;
  int64_t count = 0, grain = 1;  // how the pool splits the work (fusion/cpu_work_split.h)
  int64_t scratch_floats = 0;  // working memory of one call, passed as fj_scratch
};

// Lanes of a reduction in generated loops: kFjReduceLanes (fj_kernel.h),
// the lanes of fj_reduce_span, so that a reduction inside a loop gives its
// bits.
inline constexpr int kCpuReduceLanes = 32;

// A row kernel requests the next row of its reads while it finishes the
// current one (its last element loop asks, a block at a time, for the
// columns of the next row that the block works on) when that row is at
// most this many bytes (all reads together): it then arrives in the
// L1/L2 cache in time and does not push out the row being worked on.
// Longer rows stream well by themselves. Asking for the start of the next
// row all at once, before the row's work (4 KiB in all, the earlier
// design), stalled the core on its miss buffers: on the AMD EPYC VM the
// f32 residual + LayerNorm kernel ran 1.2-1.3x faster with no requests at
// all, and 1.5x faster with them spread over the last loop
// (bench/results/2026-12-02-cpu-row-streams.md).
inline constexpr int64_t kCpuPrefetchRowBytes = int64_t{32} << 10;

// How far ahead of its tile a pointwise kernel requests each read that
// streams through it (fj_prefetch_span), in bytes. The loads of a loop
// with much arithmetic per element (GeLU) leave few cache misses in
// flight: on the Intel Xeon VM the unfused bf16 GeLU kernel took 1.4-1.5 ns
// per element and thread from memory against 0.64-0.96 from L1 (in a
// standalone harness, from one process to the next), and 0.74-0.77 from
// memory with each tile's lines requested 2 KiB ahead; 1 KiB did as well,
// 4 KiB and more a little worse, and a cheap add gained 5-15%
// (bench/results/2026-12-02-cpu-prefetch-ahead.md).
inline constexpr int64_t kCpuPrefetchAheadBytes = 2048;

// Elements a pointwise kernel computes per tile.
inline constexpr int64_t kCpuTile = 256;

// The C++ of kernel `index` of `plan` (matmuls too: on the CPU they are
// generated code). Throws fusejit::Error for an index out of range or a
// kernel naming nodes the plan's graph lacks.
CpuKernelSource emit_cpu_kernel(const FusionPlan& plan, int index);
std::vector<CpuKernelSource> emit_cpu(const FusionPlan& plan);

// Several kernels as one translation unit (codegen/translation_unit.h):
// one compiler run for several kernels saves the start-up, parsing and
// linking each run pays (a third of a small kernel's compile).
std::string cpu_module_source(const std::vector<const CpuKernelSource*>& kernels);

// The helpers every generated kernel starts with (src/codegen/cpu/fj_*.h),
// between these two lines.
std::string_view cpu_helpers_source();
inline constexpr std::string_view kCpuHelpersBegin = "// ---- fusejit CPU helpers (src/codegen/cpu/fj_*.h) ----";
inline constexpr std::string_view kCpuHelpersEnd = "// ---- end of fusejit CPU helpers ----";

}  // namespace fusejit
