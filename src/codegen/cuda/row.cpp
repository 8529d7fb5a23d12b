// Row kernels: reductions over the last dimension with the elementwise ops
// that produce their row (prologue) and use their result (epilogue).
//
// Persistent variants read each row from memory once and keep it in
// registers: thread t holds chunks of V consecutive elements at columns
// (c * T + t) * V for c < C, loaded with 16-byte accesses in the vector
// variant and element by element in the scalar one (the same layout).
// Row-shaped values are register arrays of C * V floats; per-row values
// (a mean, a variance) are scalars every thread holds. Reductions combine a
// thread's elements, then the warp (shuffles), then the block (shared memory).
//   warp per row:  rows up to 512 elements, 4 rows per block of 128 threads;
//                  rows of fewer than 32 chunks share a warp, each with as
//                  many lanes as it has chunks (the shapes are
//                  fusion/gpu_row_shape.h's, which the cost model counts).
//   block per row: longer rows up to the device's persistent limit.
// The re-read variant (rows beyond the limit) walks the row in tiles of T * V
// elements once per reduction stage, recomputing the prologue from memory,
// and once more to write row-shaped outputs; the cost model counts exactly
// these passes. In the persistent variants the first few [N] vectors
// (gamma, beta) are loaded once per thread, not once per row, and any
// others in every row (fusion/gpu_row_shape.h: gpu_row_vectors).
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <string_view>

#include "codegen/cuda/cuda_emitter.h"
#include "codegen/cuda/emit_common.h"
#include "codegen/cuda/emit_kernels.h"
#include "codegen/expr.h"
#include "codegen/tensor_access.h"
#include "fusion/gelu_dropout.h"
#include "fusion/gpu_row_shape.h"
#include "fusion/gpu_vector_width.h"
#include "ir/messages.h"
#include "ir/text_format.h"

namespace fusejit::cuda_emit {
namespace {

// Says once per process that the environment variable `name` holds an
// unusable `value` and is ignored.
void warn_ignored(const char* name, const char* value, const char* wanted) {
  static std::set<std::string> warned;
  static std::mutex mutex;
  std::lock_guard lock(mutex);
  if (warned.insert(std::string(name) + "=" + value).second) {
    warn(fmt::format("ignoring {}={}: want {}", name, value, wanted));
  }
}

// FUSEJIT_ROW_BLOCK_THREADS=T makes block-per-row kernels use T threads (a
// power of two, 32 to 1024) instead of about 8 elements per thread: for
// measuring other shapes on a GPU (scripts/gpu-check.sh sweeps it). The
// value is part of the generated source, so cached kernels never mix.
std::optional<int> row_block_threads_override() {
  const char* text = std::getenv("FUSEJIT_ROW_BLOCK_THREADS");
  if (text == nullptr || *text == '\0') return std::nullopt;
  char* end = nullptr;
  const long v = std::strtol(text, &end, 10);
  if (*end != '\0' || v < 32 || v > 1024 || (v & (v - 1)) != 0) {
    warn_ignored("FUSEJIT_ROW_BLOCK_THREADS", text, "a power of two from 32 to 1024");
    return std::nullopt;
  }
  return static_cast<int>(v);
}

// FUSEJIT_ROW_PREFETCH=N (1 or 2) makes persistent row kernels (16-byte
// variant) load the chunks of the N rows after the current one before
// computing it, so that a block keeps loads in flight while it reduces: an
// experiment for a GPU (scripts/gpu-check.sh times it), off by default
// until measured. 0 or unset forces nothing.
std::optional<int> row_prefetch_override() {
  const char* text = std::getenv("FUSEJIT_ROW_PREFETCH");
  if (text == nullptr || *text == '\0' || std::string_view(text) == "0") return std::nullopt;
  const std::string_view v(text);
  if (v.size() == 1 && v[0] >= '1' && v[0] <= '0' + kMaxPrefetchRows) return v[0] - '0';
  static_assert(kMaxPrefetchRows == 2, "the words below name the values taken");
  warn_ignored("FUSEJIT_ROW_PREFETCH", text, "0, 1 or 2");
  return std::nullopt;
}

class RowEmitter {
 public:
  RowEmitter(const FusionPlan& plan, const Kernel& kernel, CudaAccess access, const CudaRowShape& requested)
      : plan_(plan), g_(*plan.graph), kernel_(kernel) {
    n_ = kernel.iteration.last();
    out_.params = kernel_params(plan, kernel);
    out_.count = cuda_launch_count(kernel);
    const int width = gpu_vector_width(g_, kernel);
    out_.has_vector_path = gpu_has_vector_path(g_, kernel);
    choose_access(out_, kernel, access);
    vec_ = out_.has_vector_path ? width : 1;
    out_.vector_width = vec_;
    // dropout_call folds GeLUs into groups of 8 only.
    if (dropout_vector_width(vec_) == 8) folded_gelus_ = gelus_folded_into_dropouts(g_, kernel);
    const GpuRowShape shape = gpu_row_shape(g_, kernel);
    threads_ = shape.threads;
    if (kernel.row_strategy == RowStrategy::kReread) {
      out_.variant = CudaVariant::kReread;
    } else if (shape.warp_per_row) {
      out_.variant = CudaVariant::kWarpPerRow;
      out_.rows_per_block = kGpuWarpRowBlockThreads / threads_;
      rows_per_warp_ = 32 / threads_;
    } else {
      out_.variant = CudaVariant::kBlockPerRow;
      threads_ =
          requested.block_threads > 0 ? requested.block_threads : row_block_threads_override().value_or(threads_);
    }
    out_.block_threads = threads_;
    const int prefetch_rows =
        std::clamp(row_prefetch_override().value_or(requested.prefetch_rows), 0, kMaxPrefetchRows);
    prefetch_rows_ = out_.access == CudaAccess::kVector && out_.variant != CudaVariant::kReread ? prefetch_rows : 0;
    out_.prefetch_rows = prefetch_rows_;
    chunks_ = static_cast<int>((n_ + int64_t{threads_} * vec_ - 1) / (int64_t{threads_} * vec_));
    out_.index_64bit = true;  // the row index is a long long in every row kernel: no row count overflows it
    const std::vector<int> levels = reduction_levels(g_, kernel);
    for (size_t i = 0; i < kernel.nodes.size(); ++i) level_[kernel.nodes[i]] = levels[i];
  }

  CudaKernelSource emit() {
    // The row count is an argument and named nowhere in the source, so one
    // compiled kernel serves every batch size (a cache hit).
    write_header(w_, plan_, kernel_,
                 fmt::format("row kernel over rows of {} (their number is an argument), {} with {} threads, {}", n_,
                             cuda_variant_name(out_.variant), threads_, access_description(out_)) +
                     (prefetch_rows_ == 1 ? ", loading each next row while computing the current one"
                      : prefetch_rows_ > 1
                          ? fmt::format(", loading the next {} rows while computing the current one", prefetch_rows_)
                          : ""));
    write_helpers(w_);
    w_.blank();
    for (int32_t id : kernel_.nodes) {
      const Node& n = g_.node(id);
      if (n.info().kind != OpKind::kReduce) continue;
      w_.open("struct fj_combine_{}", n.name);
      w_.line("__device__ __forceinline__ float operator()(float acc, float x) const {{ return {}; }}",
              reduce_combine(n, "acc", "x"));
      w_.close(";");
    }
    w_.blank();
    w_.line("constexpr int kN = {};", n_);
    w_.line("constexpr int kThreads = {};", threads_);
    w_.line("constexpr int kVec = {};", vec_);
    w_.line("constexpr int kChunks = {};", chunks_);
    w_.line("constexpr int kItems = kChunks * kVec;");
    w_.line("constexpr bool kAligned = {};", out_.access == CudaAccess::kVector ? "true" : "false");
    // Every thread's every chunk lies inside the row (the launch makes
    // blockDim.x kThreads): the column guards below fold away, which saves
    // about 2 instructions per element of the demo kernel.
    w_.line("constexpr bool kExact = kChunks * kThreads * kVec == kN;");
    w_.blank();
    w_.open("__device__ __forceinline__ void {}_rows({}, long long rows)", kernel_.name,
            pointer_params(out_.params));
    write_dropout_key_locals(w_, g_, kernel_);
    if (out_.variant == CudaVariant::kReread) {
      write_reread_body();
    } else {
      write_persistent_body();
    }
    w_.close();
    w_.blank();
    w_.line("extern \"C\" __global__ void __launch_bounds__({})", threads_ * out_.rows_per_block);
    w_.open("{}({}, long long rows)", out_.name, pointer_params(out_.params));
    w_.line("{}_rows({}, rows);", kernel_.name, pointer_args(out_.params));
    w_.close();
    out_.source = w_.text();
    return out_;
  }

 private:
  // A reduction's result is one value per row, also when rows have one
  // element and its [M, 1] shape equals the iteration space.
  bool row_shaped(int32_t id) const { return g_.node(id).shape == kernel_.iteration && !is_reduce(id); }
  bool is_reduce(int32_t id) const { return g_.node(id).info().kind == OpKind::kReduce; }

  // The expression of operand `o` at element slot `slot` ("k" or "e").
  std::string operand_text(const Operand& o, const std::string& slot) const {
    if (o.is_literal()) return "";
    const int32_t id = o.node;
    const bool array = in_kernel(kernel_, id) ? row_shaped(id) : tensor_access(g_.node(id).shape, kernel_.iteration)
                                                                       .varies_along_row();
    const std::string name = in_kernel(kernel_, id) ? value_name(g_, id) : read_name(g_, id);
    return array ? name + "[" + slot + "]" : name;
  }

  // A pointer to slot `slot` of a row-shaped operand's array ("v_g + k").
  std::string operand_pointer(const Operand& o, const std::string& slot) const {
    return (in_kernel(kernel_, o.node) ? value_name(g_, o.node) : read_name(g_, o.node)) + " + " + slot;
  }

  std::string expression(int32_t id, const std::string& slot, const std::string& column) const {
    const Node& n = g_.node(id);
    std::vector<std::string> operands;
    for (const Operand& o : n.operands) operands.push_back(operand_text(o, slot));
    const std::string index = row_shaped(id) ? fmt::format("(unsigned long long)(row * kN + {})", column)
                                             : std::string("(unsigned long long)row");
    return as_computed(g_, kernel_, id, node_expression(g_, id, operands, index));
  }

  // The call that drops `width` elements of dropout node `id` from slot
  // `slot` on: from the GeLU's operand, with the GeLU computed in the call,
  // where the GeLU folds into the dropout (fusion/gelu_dropout.h); the
  // GeLU's own values then go unused, and the compiler leaves them out.
  std::string dropout_call(int32_t id, int width, const std::string& slot, const std::string& out,
                           const std::string& index) const {
    const Node& n = g_.node(id);
    const int32_t gelu = width == 8 ? gelu_folded_into_dropout(g_, kernel_, id) : -1;
    if (gelu < 0) return dropout_vector_call(n, width, operand_pointer(n.operands[0], slot), out, index);
    return gelu_dropout_vector_call(n, operand_pointer(g_.node(gelu).operands[0], slot), out, index);
  }

  // Whether node `id` is a GeLU that dropout_call computes with its dropout.
  bool folded_gelu(int32_t id) const { return folded_gelus_.contains(id); }

  // Block reductions per row; each is written once per row, in the order
  // the code runs them.
  int block_reductions() const {
    if (out_.variant == CudaVariant::kWarpPerRow) return 0;
    return static_cast<int>(
        std::count_if(kernel_.nodes.begin(), kernel_.nodes.end(), [&](int32_t id) { return is_reduce(id); }));
  }

  // The shared buffer for the block reductions: two of 32 floats, used in
  // turn, so that each reduction needs one barrier (fj_reduce.cuh). With an
  // odd number of reductions per row, the row's first would follow the
  // last one's buffer: the rows alternate which buffer they start with
  // (fj_first_buffer, 0 or 32, flipped at the end of every row) instead of
  // paying a barrier before it, the second barrier of an RMSNorm's row.
  void write_reduce_buffer() {
    const int reductions = block_reductions();
    if (reductions == 0) return;
    w_.line("__shared__ float fj_smem[64];");
    w_.line("const fj_reduce_slots fj_slots = fj_make_reduce_slots<kThreads / 32>();");
    if (reductions % 2 == 1) w_.line("int fj_first_buffer = 0;  // of fj_smem, for this row's first reduction");
  }

  // At the end of the row loop: the next row starts on the other buffer
  // where rows hold an odd number of block reductions.
  void write_reduce_buffer_flip() {
    if (block_reductions() % 2 == 1) w_.line("fj_first_buffer ^= 32;");
  }

  // The call for the row's next block reduction: reduction i takes the
  // buffer after the one reduction i - 1 took.
  std::string reduce_call(const Node& n, const std::string& acc) {
    const std::string combine = fmt::format("fj_combine_{}()", n.name);
    if (out_.variant == CudaVariant::kWarpPerRow) {
      return fmt::format("fj_warp_reduce{}({}, {})", rows_per_warp_ > 1 ? "<kThreads>" : "", acc, combine);
    }
    const int i = reduced_++;
    const bool odd = block_reductions() % 2 == 1;
    const std::string buffer =
        odd ? (i % 2 == 0 ? " + fj_first_buffer" : " + (32 - fj_first_buffer)") : (i % 2 == 1 ? " + 32" : "");
    return fmt::format("fj_block_reduce<kThreads / 32>({}, {}, fj_smem{}, fj_slots)", acc, combine, buffer);
  }

  void write_reduce_result(const Node& n, int32_t id, const std::string& acc) {
    const std::string divide = n.info().reduce_divides_by_count ? " / (float)kN" : "";
    w_.line("const float {} = {};", value_name(g_, id),
            as_computed(g_, kernel_, id, fmt::format("{}{}", reduce_call(n, acc), divide)));
  }

  // Loads of reads whose value differs per row but not along it ([M, 1]).
  void write_per_row_reads() {
    for (int32_t id : kernel_.reads) {
      const TensorAccess access = tensor_access(g_.node(id).shape, kernel_.iteration);
      if (access.varies_along_row()) continue;
      const std::string load =
          fmt::format("fj_to_float({}[{}])", param_name(g_, id), row_offset(access, kernel_.iteration, "row"));
      w_.line("const float {} = {};", read_name(g_, id), rows_per_warp_ > 1 ? "fj_live ? " + load + " : 0.0f" : load);
    }
  }

  void write_per_row_writes() {
    for (int32_t id : kernel_.writes) {
      if (row_shaped(id)) continue;
      w_.line("if (tid == 0{}) {}[row] = fj_from_float<{}>({});", rows_per_warp_ > 1 ? " && fj_live" : "",
              param_name(g_, id), storage_type(g_.node(id).dtype), value_name(g_, id));
    }
  }

  // Whether chunk column `column` lies inside the row: always, when kExact.
  static std::string in_row(const std::string& column) { return "kExact || " + column + " < kN"; }

  // The same, and that the row exists: a warp that shares out several rows
  // runs past the last one in some of its lanes (write_persistent_body).
  std::string in_live_row(const std::string& column) const {
    return rows_per_warp_ > 1 ? "fj_live && (" + in_row(column) + ")" : in_row(column);
  }

  // Column of element slot k of this thread, in the persistent layout.
  static std::string persistent_column() { return "((k / kVec) * kThreads + tid) * kVec + k % kVec"; }

  // Loads of tensor `id`'s chunks from `base`: "0" for an [N] vector, the
  // same in every row, else the row's offset.
  void write_chunk_loads(int32_t id, const std::string& base, const std::string& pointer = "") {
    const Node& n = g_.node(id);
    const std::string r = read_name(g_, id);
    w_.line("float {}[kItems];", r);
    w_.line("#pragma unroll");
    w_.open("for (int c = 0; c < kChunks; ++c)");
    w_.line("const int j = (c * kThreads + tid) * kVec;");
    w_.line("if ({}) fj_load<{}, kVec>({} + {}j, {} + c * kVec, kAligned);",
            base == "0" ? in_row("j") : in_live_row("j"), storage_type(n.dtype),
            pointer.empty() ? param_name(g_, id) : pointer, base == "0" ? "" : base + " + ", r);
    w_.line("else for (int e = 0; e < kVec; ++e) {}[c * kVec + e] = 0.0f;", r);
    w_.close();
  }

  // uint4s per chunk of kVec elements of tensor `id`.
  std::string raw_chunks(int32_t id) const {
    return fmt::format("(kVec * {} / 16)", dtype_size(g_.node(id).dtype));
  }

  // The row `ahead` rows after the current one (ahead >= 1) in this
  // block's rows.
  static std::string row_ahead(int ahead) {
    return ahead == 1 ? "row + fj_row_step" : fmt::format("row + {} * fj_row_step", ahead);
  }

  // The uint4 array that holds tensor `id`'s chunks of the row `ahead` rows
  // after the one being computed, as loaded.
  std::string raw_name(int32_t id, int ahead) const {
    return read_name(g_, id) + "_raw" + (ahead > 0 ? std::to_string(ahead) : "");
  }

  // Tensor `id`'s chunks of row `row` as loaded (into raw_name(id, ahead)),
  // if `row` < rows. `in_loop`: with fj_load_raw_early, a load ptxas keeps
  // ahead of the row's first barrier, where it sank the read-only (nc) one
  // past it, to next to the end of the row's work.
  void write_raw_loads(int32_t id, const std::string& row, int ahead, bool declare, bool in_loop) {
    const std::string raw = raw_name(id, ahead);
    if (declare) w_.line("uint4 {}[kChunks * {}];", raw, raw_chunks(id));
    w_.open("if ({} < rows)", row);
    w_.line("#pragma unroll");
    w_.open("for (int c = 0; c < kChunks; ++c)");
    w_.line("const int j = (c * kThreads + tid) * kVec;");
    const std::string offset = row_offset(tensor_access(g_.node(id).shape, kernel_.iteration), kernel_.iteration, row);
    w_.line("if ({}) fj_load_raw{}<{}, kVec>({} + {} + j, {} + c * {});", in_row("j"), in_loop ? "_early" : "",
            storage_type(g_.node(id).dtype), param_name(g_, id), offset, raw, raw_chunks(id));
    w_.close();
    w_.close();
  }

  void write_persistent_body() {
    const bool warp = out_.variant == CudaVariant::kWarpPerRow;
    write_reduce_buffer();
    w_.line("const int tid = threadIdx.x;");
    // [N] vectors: the same columns in every row, so the first few
    // (gpu_row_vectors) are loaded once per thread and kept widened
    // (fj_keep): ptxas would otherwise widen them again in every row.
    const GpuRowVectors vectors = gpu_row_vectors(g_, kernel_);
    // Those beyond the kept: loaded in every row, where first used.
    std::set<int32_t> reloaded(vectors.reloaded.begin(), vectors.reloaded.end());
    for (int32_t id : vectors.kept) {
      write_chunk_loads(id, "0");
      w_.line("#pragma unroll");
      w_.line("for (int k = 0; k < kItems; ++k) fj_keep({}[k]);", read_name(g_, id));
    }
    std::vector<int32_t> row_reads;  // read anew for every row
    for (int32_t id : kernel_.reads) {
      const TensorAccess access = tensor_access(g_.node(id).shape, kernel_.iteration);
      if (access.varies_along_row() && !access.same_for_every_row()) row_reads.push_back(id);
    }
    if (warp) {
      w_.line("const long long fj_row_step = (long long)gridDim.x * blockDim.y;");
      w_.line("long long row = (long long)blockIdx.x * blockDim.y + threadIdx.y;");
    } else {
      w_.line("const long long fj_row_step = gridDim.x;");
      w_.line("long long row = blockIdx.x;");
    }
    // Rows row + k * fj_row_step for k < prefetch_rows_ (the first is the
    // current one at the top of the loop).
    for (int ahead = 0; ahead < prefetch_rows_; ++ahead) {
      // Parenthesized: row_offset multiplies it by the row length.
      const std::string first = ahead == 0 ? "row" : "(" + row_ahead(ahead) + ")";
      for (int32_t id : row_reads) write_raw_loads(id, first, ahead, /*declare=*/true, /*in_loop=*/false);
    }
    if (rows_per_warp_ > 1) {
      // The lanes of a warp take part in every shuffle together, so the
      // warp runs the loop while its first row exists; lanes of rows past
      // the last load zeros and store nothing.
      w_.line("const long long fj_row_in_warp = threadIdx.y % {};", rows_per_warp_);
      w_.open("for (; row - fj_row_in_warp < rows; row += fj_row_step)");
      w_.line("const bool fj_live = row < rows;");
    } else {
      w_.open("for (; row < rows; row += fj_row_step)");
    }
    for (int32_t id : row_reads) {
      if (prefetch_rows_ == 0) {
        write_chunk_loads(id, row_offset(tensor_access(g_.node(id).shape, kernel_.iteration), kernel_.iteration, "row"));
        continue;
      }
      const std::string r = read_name(g_, id);
      w_.line("float {}[kItems];", r);
      w_.line("#pragma unroll");
      w_.open("for (int c = 0; c < kChunks; ++c)");
      w_.line("if ({3}) fj_convert_raw<{0}, kVec>({1}_raw + c * {2}, {1} + c * kVec);", storage_type(g_.node(id).dtype),
              r, raw_chunks(id), in_live_row("(c * kThreads + tid) * kVec"));
      w_.line("else for (int e = 0; e < kVec; ++e) {}[c * kVec + e] = 0.0f;", r);
      w_.close();
    }
    if (prefetch_rows_ > 0 && !row_reads.empty()) {
      // Each later row's chunks move up one place; the last place takes the
      // row prefetch_rows_ ahead.
      for (int ahead = 1; ahead < prefetch_rows_; ++ahead) {
        for (int32_t id : row_reads) {
          w_.line("#pragma unroll");
          w_.line("for (int c = 0; c < kChunks * {}; ++c) {}[c] = {}[c];", raw_chunks(id), raw_name(id, ahead - 1),
                  raw_name(id, ahead));
        }
      }
      w_.line("// The loads of the row {} ahead, in flight while this row is computed.",
              prefetch_rows_ == 1 ? "one" : std::to_string(prefetch_rows_));
      w_.line("const long long fj_next_row = {};", row_ahead(prefetch_rows_));
      for (int32_t id : row_reads) {
        write_raw_loads(id, "fj_next_row", prefetch_rows_ - 1, /*declare=*/false, /*in_loop=*/true);
      }
    }
    write_per_row_reads();
    for (int32_t id : kernel_.nodes) {
      const Node& n = g_.node(id);
      for (const Operand& o : n.operands) {
        if (o.is_literal() || !reloaded.contains(o.node)) continue;
        // From L1 or L2, not HBM: every row reads the same columns. The
        // address is made opaque in the loop (fj_opaque), or the compiler
        // would hoist these invariant loads out of it, into the registers
        // they are not given.
        // fj_ names are the generator's own: no user name can make r_NAME,
        // p_NAME or v_NAME clash with it (an input named w_at could).
        const Node& v = g_.node(o.node);
        const std::string at = "fj_at_" + v.name;
        w_.line("const {}* {} = {};", storage_type(v.dtype), at, param_name(g_, o.node));
        w_.line("fj_opaque({});", at);
        write_chunk_loads(o.node, "0", at);
        reloaded.erase(o.node);
      }
      w_.line("// {}", statement_comment(g_, n));
      if (folded_gelu(id)) {
        w_.line("//   computed with the dropout of it below (fj_gelu_dropout8)");
        continue;
      }
      if (is_reduce(id)) {
        w_.line("float {};", value_name(g_, id));
        w_.open("");
        w_.line("float acc = {};", reduce_identity(n));
        w_.line("#pragma unroll");
        w_.open("for (int c = 0; c < kChunks; ++c)");
        w_.line("if (!kExact && (c * kThreads + tid) * kVec >= kN) continue;");
        w_.line("#pragma unroll");
        w_.line("for (int e = 0; e < kVec; ++e) acc = fj_combine_{}()(acc, {});", n.name,
                operand_text(n.operands[0], "c * kVec + e"));
        w_.close();
        w_.line("{} = {};", value_name(g_, id),
                as_computed(g_, kernel_, id,
                            fmt::format("{}{}", reduce_call(n, "acc"),
                                        n.info().reduce_divides_by_count ? " / (float)kN" : "")));
        w_.close();
        continue;
      }
      if (row_shaped(id)) {
        w_.line("float {}[kItems];", value_name(g_, id));
        w_.line("#pragma unroll");
        if (n.op == Op::kDropout && dropout_vector_width(vec_) > 0) {
          // Chunks of kVec columns start at multiples of kVec: one Philox call per 8 elements (per 4 when
          // kVec is 4, as for f32).
          const int width = dropout_vector_width(vec_);
          w_.line("for (int k = 0; k < kItems; k += {}) {};", width,
                  dropout_call(id, width, "k", value_name(g_, id) + " + k",
                               fmt::format("(unsigned long long)(row * kN + {})", persistent_column())));
          if (rounds_in_kernel(g_, kernel_, id)) {
            w_.line("#pragma unroll");
            w_.line("for (int k = 0; k < kItems; ++k) {0}[k] = fj_round_{1}({0}[k]);", value_name(g_, id),
                    dtype_name(n.dtype));
          }
        } else {
          w_.line("for (int k = 0; k < kItems; ++k) {}[k] = {};", value_name(g_, id),
                  expression(id, "k", persistent_column()));
        }
      } else {
        w_.line("const float {} = {};", value_name(g_, id), expression(id, "k", ""));
      }
    }
    for (int32_t id : kernel_.writes) {
      if (!row_shaped(id)) continue;
      w_.line("#pragma unroll");
      w_.open("for (int c = 0; c < kChunks; ++c)");
      w_.line("const int j = (c * kThreads + tid) * kVec;");
      w_.line("if ({}) fj_store<{}, kVec>({} + row * kN + j, {} + c * kVec, kAligned);", in_live_row("j"),
              storage_type(g_.node(id).dtype), param_name(g_, id), value_name(g_, id));
      w_.close();
    }
    write_per_row_writes();
    write_reduce_buffer_flip();
    w_.close();
  }

  void write_reread_body() {
    write_reduce_buffer();
    w_.line("const int tid = threadIdx.x;");
    w_.open("for (long long row = blockIdx.x; row < rows; row += gridDim.x)");
    write_per_row_reads();
    const int passes = kernel_.row_passes;
    // Each pass loads and computes only what its reductions (and the last
    // pass's stores) need, rather than leaving the rest for ptxas to drop.
    const std::vector<std::set<int32_t>> needs = row_pass_needs(g_, kernel_);
    for (int32_t id : kernel_.nodes) {  // per-row values that need no reduction
      if (!row_shaped(id) && !is_reduce(id) && level_[id] == 0) {
        w_.line("const float {} = {};", value_name(g_, id), expression(id, "e", ""));
      }
    }
    for (int pass = 0; pass < passes; ++pass) {
      w_.line("// pass {} of {}: {}", pass + 1, passes,
              pass < kernel_.reduction_stages ? "reductions of stage " + std::to_string(pass + 1)
                                              : std::string("outputs"));
      std::vector<int32_t> reductions;
      for (int32_t id : kernel_.nodes) {
        if (is_reduce(id) && level_[id] == pass) reductions.push_back(id);
      }
      for (int32_t id : reductions) {
        w_.line("float acc_{} = {};", g_.node(id).name, reduce_identity(g_.node(id)));
      }
      w_.open("for (int j = tid * kVec; j < kN; j += kThreads * kVec)");
      for (int32_t id : kernel_.reads) {
        const TensorAccess access = tensor_access(g_.node(id).shape, kernel_.iteration);
        if (!access.varies_along_row() || !needs[static_cast<size_t>(pass)].contains(id)) continue;
        const Node& n = g_.node(id);
        w_.line("float {}[kVec];", read_name(g_, id));
        w_.line("fj_load<{}, kVec>({} + {} + j, {}, kAligned);", storage_type(n.dtype), param_name(g_, id),
                row_offset(access, kernel_.iteration, "row"), read_name(g_, id));
      }
      for (int32_t id : kernel_.nodes) {
        if (!row_shaped(id) || !needs[static_cast<size_t>(pass)].contains(id) || folded_gelu(id)) continue;
        const Node& n = g_.node(id);
        w_.line("float {}[kVec];", value_name(g_, id));
        w_.line("#pragma unroll");
        if (n.op == Op::kDropout && dropout_vector_width(vec_) > 0) {
          const int width = dropout_vector_width(vec_);
          w_.line("for (int e = 0; e < kVec; e += {}) {};", width,
                  dropout_call(id, width, "e", value_name(g_, id) + " + e", "(unsigned long long)(row * kN + j + e)"));
          if (rounds_in_kernel(g_, kernel_, id)) {
            w_.line("#pragma unroll");
            w_.line("for (int e = 0; e < kVec; ++e) {0}[e] = fj_round_{1}({0}[e]);", value_name(g_, id),
                    dtype_name(n.dtype));
          }
        } else {
          w_.line("for (int e = 0; e < kVec; ++e) {}[e] = {};", value_name(g_, id), expression(id, "e", "j + e"));
        }
      }
      for (int32_t id : reductions) {
        const Node& n = g_.node(id);
        w_.line("#pragma unroll");
        w_.line("for (int e = 0; e < kVec; ++e) acc_{0} = fj_combine_{0}()(acc_{0}, {1});", n.name,
                operand_text(n.operands[0], "e"));
      }
      if (pass == passes - 1) {
        for (int32_t id : kernel_.writes) {
          if (!row_shaped(id)) continue;
          w_.line("fj_store<{}, kVec>({} + row * kN + j, {}, kAligned);", storage_type(g_.node(id).dtype),
                  param_name(g_, id), value_name(g_, id));
        }
      }
      w_.close();
      for (int32_t id : reductions) write_reduce_result(g_.node(id), id, "acc_" + g_.node(id).name);
      for (int32_t id : kernel_.nodes) {  // per-row values this pass's reductions make computable
        if (!row_shaped(id) && !is_reduce(id) && level_[id] == pass + 1) {
          w_.line("const float {} = {};", value_name(g_, id), expression(id, "e", ""));
        }
      }
    }
    write_per_row_writes();
    write_reduce_buffer_flip();
    w_.close();
  }

  const FusionPlan& plan_;
  const Graph& g_;
  const Kernel& kernel_;
  CudaKernelSource out_;
  SourceWriter w_;
  int64_t n_ = 0;
  int vec_ = 1;
  absl::flat_hash_set<int32_t> folded_gelus_;  // GeLUs dropout_call computes with their dropout
  int threads_ = 32;
  int rows_per_warp_ = 1;  // rows a warp shares out (warp per row, rows of fewer than 32 chunks)
  int prefetch_rows_ = 0;  // CudaRowShape::prefetch_rows or FUSEJIT_ROW_PREFETCH
  int chunks_ = 1;
  std::map<int32_t, int> level_;
  int reduced_ = 0;  // block reductions written so far
};

}  // namespace

CudaKernelSource emit_row(const FusionPlan& plan, const Kernel& kernel, CudaAccess access, const CudaRowShape& shape) {
  return RowEmitter(plan, kernel, access, shape).emit();
}

std::vector<CudaRowShape> row_shape_candidates(const FusionPlan& plan, const Kernel& kernel, CudaAccess access) {
  const int64_t n = kernel.iteration.last();
  const GpuRowShape base = gpu_row_shape(*plan.graph, kernel);
  if (kernel.row_strategy == RowStrategy::kReread || base.warp_per_row) return {};
  // A shape the experiment variables force is not tuned (a value they
  // ignore, or FUSEJIT_ROW_PREFETCH=0, forces nothing).
  if (row_block_threads_override() || row_prefetch_override()) return {};
  const bool vector = access == CudaAccess::kVector && gpu_has_vector_path(*plan.graph, kernel);
  // Each element of a thread's share is unrolled code: past 16 the live
  // arrays no longer fit in registers. And every thread needs one access
  // of the row at least: 1024 threads of 8 bf16 over rows of 4096 left half
  // of them idle through every barrier and reduction, at 1 block per SM.
  const int64_t access_elements = vector ? gpu_vector_width(*plan.graph, kernel) : 1;
  auto fits = [&](int threads) {
    return threads >= 64 && threads <= 1024 && (n + threads - 1) / threads <= 16 && threads * access_elements <= n;
  };
  std::vector<CudaRowShape> out = {CudaRowShape{}};
  for (int threads : {base.threads / 2, base.threads * 2}) {
    if (fits(threads)) out.push_back({.block_threads = threads});
  }
  if (vector) {
    out.push_back({.prefetch_rows = 1});
    // Two rows ahead: ptxas issues the in-loop loads of one row ahead late
    // in the row's work (after its GeLU and first reduction in the demo
    // kernel), so they hide only part of the memory latency; two rows
    // ahead gives them a whole row more. It holds 4 more registers for each
    // 16-byte chunk of a thread's share of each row read: only with the
    // default threads, and only where their share of a row is 8 elements
    // or fewer (at 16 bf16 a thread, a softmax went from 32 to 64 registers
    // and a residual LayerNorm spilled 196 bytes).
    if ((n + base.threads - 1) / base.threads <= 8) out.push_back({.prefetch_rows = 2});
    if (fits(base.threads / 2)) out.push_back({.block_threads = base.threads / 2, .prefetch_rows = 1});
  }
  return out;
}

}  // namespace fusejit::cuda_emit
