// The nodes of a CPU kernel as loops over the elements of a tile (pointwise
// kernels) or of a row (row kernels).
//
// Consecutive elementwise nodes share one loop, in which each value is a
// local float: the compiler vectorizes the whole chain and keeps it in
// registers. A value goes to an f32 array only when something outside its
// loop needs it element by element (dropout, a later loop that cannot
// compute it again: see the end of this comment), and a written
// value is stored to its tensor from inside its loop. Dropout runs as one
// fj_dropout_span call over the array of its operand (Philox draws 8
// elements per call). A reduction of a value computed in a loop is
// accumulated inside that loop, in 32 lanes, in fj_reduce_span's order (so
// the same bits), rather than in a pass of its own over an array: LayerNorm
// saves two passes over the row and the array of its squares. Reductions
// of a read or of a dropout result run over its array with fj_reduce_span.
// A value of one cheap op (add, sub, mul, ...) with at most one operand
// that varies along the loop (a read, an array, a value itself computed
// again), which a later loop needs, is computed again there rather than
// kept in an array: LayerNorm's x - mean, which the squares' loop and the
// last loop both use, cost an array written and read again per row.
// Written values that stream (large outputs) go out from their loop a
// block of 32 at a time (fj_stream_block) in row kernels, from an array
// after the loops in pointwise tiles (ElementSpace::stream_in_blocks).
#pragma once

#include <functional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "codegen/source_writer.h"
#include "fusion/plan.h"

namespace fusejit::cpu_emit {

struct ElementSpace {
  std::string count;       // elements per loop: "n" (a tile) or "kN" (a row)
  std::string first_index; // global element index of slot 0: "i" or "row * kN"
  // Global element index of a value that is one per loop (a per-row value,
  // an element of an [M, 1] tensor): "row" in row kernels. Dropout of such a
  // value draws its random number at this index.
  std::string single_index;
  // Whether a node of the kernel, or a read, has one value per element of
  // the loop (else one value for all of them: a per-row value, a scalar).
  std::function<bool(int32_t)> per_element;
  // Whether a written per-element value goes out with streaming stores
  // (fj_stream_span from its array) rather than stores inside its loop.
  std::function<bool(int32_t)> streams;
  // The count when it is a constant (a row kernel's kN), else -1: a loop
  // whose count is a multiple of the reductions' 32 lanes has no tail.
  int64_t constant_count = -1;
  // Whether a 16-bit read is widened where a loop uses it
  // (fj_to_float(r_NAME[c]), r_NAME pointing at its storage) instead of
  // being converted into an f32 array first. Pointwise tiles: the array
  // cost a bf16 add a quarter of its time. Row kernels keep the array, as a
  // row is used by several passes. A read that dropout or a reduction
  // takes as a whole array keeps it either way.
  bool widen_reads_in_loop = false;
  // Whether streamed values go out a block of kCpuReduceLanes at a time
  // from the loop that computes them (fj_stream_block; row kernels), or
  // from an array after the loops (fj_stream_span; pointwise tiles, whose
  // bf16 add ran 12-25% slower by blocks on the AMD EPYC VM, while the
  // f32 residual + LayerNorm row kernel ran 1.1x faster by blocks).
  bool stream_in_blocks = false;
  // Statements that the last element loop runs at the start of each block
  // of kCpuReduceLanes elements starting at element c0: a row kernel's
  // requests for the same columns of its reads' next row. The last loop,
  // then, is written in blocks even when it has nothing else to do in
  // them.
  std::vector<std::string> per_block_requests;
};

class ElementLoops {
 public:
  ElementLoops(const Graph& graph, const Kernel& kernel, ElementSpace space);

  // Kernel values that need an f32 array of `count` floats ("a_NAME").
  const std::vector<int32_t>& arrays() const { return arrays_; }
  static std::string array_name(const Graph& graph, int32_t id);
  // Whether read `id` is widened inside the loops (ElementSpace::
  // widen_reads_in_loop): then r_NAME is a pointer to its storage type.
  bool widens_in_loop(int32_t read) const;
  // Writes every node of the kernel, in order, and stores its writes.
  void write(SourceWriter& w) const;

 private:
  // kAttached: a reduction accumulated in the loop that computes its
  // operand (that loop's `reductions`); nothing is written in its place.
  enum class Step { kLoop, kReduce, kDropout, kScalar, kAttached };
  struct Group {
    Step step;
    std::vector<int32_t> nodes;       // several for a loop, else one
    std::vector<int32_t> reductions;  // a loop's attached reductions
    std::vector<int32_t> recomputed;  // earlier loops' values a loop computes again, first
  };
  // Whether node `id`, computed in a loop, can be computed again in a later
  // loop instead of being kept in an array: one cheap op with at most one
  // operand that varies along the loop.
  bool recomputable(int32_t id) const;
  // Makes value `id` at hand in loop group `gi`: computed again there (and
  // so, in turn, its operands) or kept in an array.
  void make_available(int32_t id, size_t gi);
  void need_array(int32_t id);

  std::string operand(const Operand& o, const Group& group) const;
  // operand() of each of n's operands.
  std::vector<std::string> operands_of(const Node& n, const Group& group) const;
  bool per_element_operand(const Node& n) const;
  bool written(int32_t id) const;
  // A written value that goes out with streaming stores (ElementSpace::streams).
  bool streamed(int32_t id) const;
  bool streams_by_block(int32_t id) const;    // streamed, from its loop
  bool streams_from_array(int32_t id) const;  // streamed, from its array after the loops
  // `last`: the kernel's last element loop (ElementSpace::per_block_requests).
  void write_loop(SourceWriter& w, const Group& group, bool last) const;
  // `reduction_step` is the statement that feeds element c's operand of
  // each attached reduction to lane j ({0}: the reduction's name, {1}: the
  // operand).
  // `in_block`: the body of write_blocked_loop's blocks, where streamed
  // values go to their block rather than to memory.
  void write_loop_body(SourceWriter& w, const Group& group, std::string_view reduction_step, bool in_block) const;
  void write_blocked_loop(SourceWriter& w, const Group& group, bool last) const;
  void write_reduce_result(SourceWriter& w, int32_t id, const std::string& total) const;
  void write_stores_of_arrays(SourceWriter& w) const;

  const Graph& g_;
  const Kernel& kernel_;
  ElementSpace space_;
  std::vector<Group> groups_;
  std::vector<int32_t> arrays_;
  std::set<int32_t> array_set_;
  std::set<int32_t> whole_array_reads_;  // reads that dropout or a reduction takes as an array
  std::vector<int> group_of_;  // by node id, -1 outside the kernel
};

}  // namespace fusejit::cpu_emit
