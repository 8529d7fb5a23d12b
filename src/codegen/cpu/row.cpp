// Row CPU kernels: the work items are rows. Each thread walks its rows one
// at a time; row-shaped reads, and the values that reductions and dropout
// need, are f32 arrays of the row's length (in the thread's scratch, which
// the runtime keeps between calls: runtime/worker_scratch.h), so a
// row is read from memory once and its reductions and epilogue run on
// cache-resident arrays (element_loops.h writes the nodes). On a CPU the
// persistent and re-read strategies therefore generate the same loops: a row
// beyond the cache's size spills its arrays to memory by itself.
// [N] vectors (gamma, beta) are converted once per call, not once per row.
#include <algorithm>
#include <utility>

#include "codegen/cpu/cpu_emit_common.h"
#include "codegen/cpu/element_loops.h"
#include "codegen/expr.h"
#include "codegen/tensor_access.h"

namespace fusejit::cpu_emit {
namespace {

class RowEmitter {
 public:
  RowEmitter(const FusionPlan& plan, const Kernel& kernel) : plan_(plan), g_(*plan.graph), kernel_(kernel) {
    n_ = kernel.iteration.last();
  }

  CpuKernelSource emit() {
    CpuKernelSource out;
    out.name = kernel_.name;
    out.variant = CpuVariant::kRow;
    out.params = kernel_params(plan_, kernel_);
    const CpuWorkSplit split = cpu_work_split(g_, kernel_);
    out.count = split.count;
    out.grain = split.grain;
    write_header(w_, plan_, kernel_,
                 fmt::format("row kernel over rows of {} (their number is an argument), one row at a time in f32 "
                             "arrays",
                             n_));
    write_helpers(w_);
    w_.blank();
    for (int32_t id : kernel_.nodes) {
      const Node& n = g_.node(id);
      if (n.info().kind != OpKind::kReduce) continue;
      w_.open("struct fj_combine_{}", n.name);
      // The same expression for one float and for a vector of lanes (fj_lanes).
      w_.line("float operator()(float acc, float x) const {{ return {}; }}", reduce_combine(n, "acc", "x"));
      w_.line("fj_vec operator()(fj_vec acc, fj_vec x) const {{ return {}; }}", reduce_combine(n, "acc", "x"));
      w_.close(";");
    }
    w_.blank();
    open_entry(w_, g_, kernel_, out.params);
    w_.line("constexpr long long kN = {};", n_);
    // Arrays padded to 16 floats (64 bytes), so each one starts aligned.
    w_.line("constexpr long long kStride = (kN + 15) / 16 * 16;");
    ElementSpace space{
        .count = "kN",
        .first_index = "row * kN",
        .single_index = "row",
        .per_element = [this](int32_t id) { return in_kernel(kernel_, id) ? row_shaped(id) : read_is_array(id); },
        .streams = [this](int32_t id) { return streams(g_, id); },
        .constant_count = n_,
        .stream_in_blocks = true,
        .per_block_requests = next_row_requests()};
    const ElementLoops loops(g_, kernel_, std::move(space));
    std::vector<std::string> arrays;
    for (int32_t id : kernel_.reads) {
      if (read_is_array(id) && !read_in_place(id)) arrays.push_back(read_name(g_, id));
    }
    for (int32_t id : loops.arrays()) arrays.push_back(ElementLoops::array_name(g_, id));
    // The arrays, each padded to 64 bytes, are the scratch the runtime passes.
    out.scratch_floats = static_cast<int64_t>(arrays.size()) * ((n_ + 15) / 16 * 16);
    w_.line("float* const fj_arrays = fj_scratch;  // {} arrays of kStride floats", arrays.size());
    for (size_t a = 0; a < arrays.size(); ++a) {
      w_.line("float* __restrict {} = fj_arrays + {} * kStride;", arrays[a], a);
    }
    for (int32_t id : kernel_.reads) {
      const TensorAccess access = tensor_access(g_.node(id).shape, kernel_.iteration);
      if (read_is_array(id) && access.same_for_every_row()) write_array_read(id, param_name(g_, id));
    }
    w_.open("for (long long row = begin; row < end; ++row)");
    for (int32_t id : kernel_.reads) write_row_read(id);
    loops.write(w_);
    for (int32_t id : kernel_.writes) {
      if (row_shaped(id)) continue;  // stored by the loops
      w_.line("{}[row] = fj_from_float<{}>({});", param_name(g_, id), storage_type(g_.node(id).dtype),
              value_name(g_, id));
    }
    w_.close();
    w_.line("fj_stream_fence();");
    w_.line("return 0;");
    w_.close();
    out.source = w_.text();
    return out;
  }

 private:
  // Rows of one element ([M, 1]) are per-row values throughout: no arrays.
  bool row_shaped(int32_t id) const { return n_ > 1 && g_.node(id).shape == kernel_.iteration; }
  bool read_is_array(int32_t id) const {
    return n_ > 1 && tensor_access(g_.node(id).shape, kernel_.iteration).varies_along_row();
  }
  // An f32 row is already the array its loops want (a copy would be 4 KiB
  // per read and row for LayerNorm over 1024).
  bool read_in_place(int32_t id) const { return cpu_emit::read_in_place(g_, id); }

  // The next row of each read that changes from row to row, requested
  // (fj_prefetch_span) a block at a time by the row's last element loop,
  // each block the columns it works on: the next row arrives while this one
  // is finished, at the pace of the work, when the row of all reads
  // together fits in kCpuPrefetchRowBytes. Longer rows stream well by
  // themselves.
  std::vector<std::string> next_row_requests() const {
    std::vector<std::string> requests;
    int64_t bytes = 0;
    for (int32_t id : kernel_.reads) {
      const TensorAccess access = tensor_access(g_.node(id).shape, kernel_.iteration);
      if (!read_is_array(id) || access.same_for_every_row()) continue;
      bytes += n_ * dtype_size(g_.node(id).dtype);
      requests.push_back(fmt::format("if (row + 1 < end) fj_prefetch_span({} + {} + c0, {});", param_name(g_, id),
                                     row_offset(access, kernel_.iteration, "(row + 1)"), kCpuReduceLanes));
    }
    if (bytes > kCpuPrefetchRowBytes) requests.clear();
    return requests;
  }

  // r_NAME, the row of read `id` that starts at `start`, as f32: the row
  // itself for f32, else converted into its scratch array.
  void write_array_read(int32_t id, const std::string& start) {
    if (read_in_place(id)) {
      w_.line("const float* __restrict {} = {};", read_name(g_, id), start);
    } else {
      w_.line("fj_load_span({}, {}, kN);", start, read_name(g_, id));
    }
  }

  void write_row_read(int32_t id) {
    const TensorAccess access = tensor_access(g_.node(id).shape, kernel_.iteration);
    const std::string offset = row_offset(access, kernel_.iteration, "row");
    if (!read_is_array(id)) {
      w_.line("const float {} = fj_to_float({}[{}]);", read_name(g_, id), param_name(g_, id), offset);
    } else if (!access.same_for_every_row()) {
      write_array_read(id, fmt::format("{} + {}", param_name(g_, id), offset));
    }
  }

  const FusionPlan& plan_;
  const Graph& g_;
  const Kernel& kernel_;
  int64_t n_ = 1;
  SourceWriter w_;
};

}  // namespace

CpuKernelSource emit_row(const FusionPlan& plan, const Kernel& kernel) { return RowEmitter(plan, kernel).emit(); }

}  // namespace fusejit::cpu_emit
