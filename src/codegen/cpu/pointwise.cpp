// Pointwise CPU kernels: the work items are the elements of the iteration
// space, walked in tiles of at most kCpuTile elements that never cross a row
// (so a broadcast [N] operand is one contiguous span of the tile's columns,
// and an [M, 1] operand one value). When every operand is dense, the space
// is one long row and tiles are limited only by kCpuTile. Each tile: point
// at its reads where they lie (a 16-bit one is widened where the loop uses
// it; only one that dropout takes whole is converted into an f32 array),
// then the nodes as element_loops.h writes them (one loop for a chain of
// elementwise ops, stores inside it).
#include <algorithm>

#include "codegen/cpu/cpu_emit_common.h"
#include "codegen/cpu/element_loops.h"
#include "codegen/expr.h"
#include "codegen/tensor_access.h"

namespace fusejit::cpu_emit {
namespace {

class PointwiseEmitter {
 public:
  PointwiseEmitter(const FusionPlan& plan, const Kernel& kernel) : plan_(plan), g_(*plan.graph), kernel_(kernel) {
    const int64_t numel = kernel.iteration.numel();
    bool all_dense = true;
    for (int32_t id : kernel.reads) {
      const Node& n = g_.node(id);
      const TensorAccess access = tensor_access(n.shape, kernel.iteration);
      if (!access.is_dense(kernel.iteration) && n.shape.numel() != 1) all_dense = false;
    }
    collapsed_ = all_dense || kernel.iteration.rank() == 0;
    cols_ = collapsed_ ? std::max<int64_t>(numel, 1) : kernel.iteration.last();
  }

  CpuKernelSource emit() {
    CpuKernelSource out;
    out.name = kernel_.name;
    out.variant = CpuVariant::kPointwise;
    out.params = kernel_params(plan_, kernel_);
    const CpuWorkSplit split = cpu_work_split(g_, kernel_);
    out.count = split.count;
    out.grain = split.grain;
    write_header(w_, plan_, kernel_,
                 fmt::format("pointwise over {} ({} elements) in tiles of up to {} within rows of {}",
                             kernel_.iteration, out.count, kCpuTile, cols_));
    write_helpers(w_);
    w_.blank();
    open_entry(w_, g_, kernel_, out.params);
    w_.line("constexpr long long kCols = {};", cols_);
    w_.line("constexpr long long kTile = {};", kCpuTile);
    ElementSpace space{.count = "n",
                       .first_index = "i",
                       .single_index = "i",
                       .per_element = [this](int32_t id) { return in_kernel(kernel_, id) || varies(id); },
                       .streams = [this](int32_t id) { return streams(g_, id); },
                       .widen_reads_in_loop = true,
                       .per_block_requests = {}};
    const ElementLoops loops(g_, kernel_, std::move(space));
    for (int32_t id : kernel_.reads) {
      if (read_kind(id, loops) == ReadKind::kArray) w_.line("alignas(64) float {}[kTile];", read_name(g_, id));
    }
    for (int32_t id : loops.arrays()) w_.line("alignas(64) float {}[kTile];", ElementLoops::array_name(g_, id));
    w_.open("for (long long i = begin; i < end;)");
    w_.line("const long long row = i / kCols;");
    w_.line("const long long col = i - row * kCols;");
    w_.line("long long n = kCols - col;");
    w_.line("if (n > end - i) n = end - i;");
    w_.line("if (n > kTile) n = kTile;");
    write_reads(loops);
    loops.write(w_);
    w_.line("i += n;");
    w_.close();
    w_.line("fj_stream_fence();");
    w_.line("return 0;");
    w_.close();
    out.source = w_.text();
    return out;
  }

 private:
  // Whether read `id` changes along a tile (then it is an array);
  // otherwise it is one value per row (or per kernel).
  bool varies(int32_t id) const {
    if (collapsed_) return g_.node(id).shape.numel() != 1;
    return tensor_access(g_.node(id).shape, kernel_.iteration).varies_along_row();
  }

  // Offset of the first element of the tile in read `id`.
  std::string offset(int32_t id) const {
    const TensorAccess access = tensor_access(g_.node(id).shape, kernel_.iteration);
    if (collapsed_) return g_.node(id).shape.numel() == 1 ? "0" : "i";
    if (access.is_dense(kernel_.iteration)) return "i";
    const std::string row = row_offset(access, kernel_.iteration, "row");
    if (!access.varies_along_row()) return row;
    return row == "0" ? "col" : row + " + col";
  }

  // How a tile sees read `id`: one value; its span where it lies (f32, or
  // a 16-bit span the loops widen element by element); or an f32 array it
  // is converted into (a 16-bit read that dropout takes as a whole).
  enum class ReadKind { kValue, kInPlace, kArray };
  ReadKind read_kind(int32_t id, const ElementLoops& loops) const {
    if (!varies(id)) return ReadKind::kValue;
    return read_in_place(g_, id) || loops.widens_in_loop(id) ? ReadKind::kInPlace : ReadKind::kArray;
  }

  // Whether read `id` streams through the kernel: it has the iteration's
  // shape, so every tile reads lines no other tile reads, which come from
  // memory unless requested ahead. A broadcast read ([N], [B, 1, N]) is
  // read again by other rows and an [M, 1] column is one value per row:
  // their lines are mostly in the cache, and a request 2 KiB ahead in them
  // would point at lines that later rows, not the next tile, read.
  bool streams_through(int32_t id) const {
    if (!varies(id)) return false;
    return collapsed_ || tensor_access(g_.node(id).shape, kernel_.iteration).is_dense(kernel_.iteration);
  }

  void write_reads(const ElementLoops& loops) {
    for (int32_t id : kernel_.reads) {
      if (streams_through(id)) {
        w_.line("fj_prefetch_span({} + {}, n, {});", param_name(g_, id), offset(id), kCpuPrefetchAheadBytes);
      }
      switch (read_kind(id, loops)) {
        case ReadKind::kInPlace:
          w_.line("const {}* __restrict {} = {} + {};", storage_type(g_.node(id).dtype), read_name(g_, id),
                  param_name(g_, id), offset(id));
          break;
        case ReadKind::kArray:
          w_.line("fj_load_span({} + {}, {}, n);", param_name(g_, id), offset(id), read_name(g_, id));
          break;
        case ReadKind::kValue:
          w_.line("const float {} = fj_to_float({}[{}]);", read_name(g_, id), param_name(g_, id), offset(id));
          break;
      }
    }
  }

  const FusionPlan& plan_;
  const Graph& g_;
  const Kernel& kernel_;
  bool collapsed_ = false;  // every read dense or one element: the space is one row
  int64_t cols_ = 1;
  SourceWriter w_;
};

}  // namespace

CpuKernelSource emit_pointwise(const FusionPlan& plan, const Kernel& kernel) {
  return PointwiseEmitter(plan, kernel).emit();
}

}  // namespace fusejit::cpu_emit
