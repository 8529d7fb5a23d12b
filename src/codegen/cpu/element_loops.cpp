#include "codegen/cpu/element_loops.h"

#include <algorithm>
#include <optional>

#include "codegen/cpu/cpu_emitter.h"
#include "codegen/expr.h"
#include "codegen/kernel_names.h"

namespace fusejit::cpu_emit {

using emit::in_kernel;
using emit::param_name;
using emit::read_name;
using emit::value_name;

ElementLoops::ElementLoops(const Graph& graph, const Kernel& kernel, ElementSpace space)
    : g_(graph), kernel_(kernel), space_(std::move(space)), group_of_(static_cast<size_t>(graph.num_nodes()), -1) {
  for (int32_t id : kernel.nodes) {
    const Node& n = g_.node(id);
    Step step = Step::kLoop;
    if (n.info().kind == OpKind::kReduce) {
      step = Step::kReduce;
    } else if (!space_.per_element(id)) {
      step = Step::kScalar;
    } else if (n.op == Op::kDropout && per_element_operand(n)) {
      step = Step::kDropout;  // dropout of a single value stays in the element loop, one Philox call per element
    }
    if (step == Step::kLoop && !groups_.empty() && groups_.back().step == Step::kLoop) {
      groups_.back().nodes.push_back(id);
    } else {
      groups_.push_back({step, {id}, {}, {}});
    }
    group_of_[static_cast<size_t>(id)] = static_cast<int>(groups_.size()) - 1;
  }
  // Reductions of a value a loop computes join that loop (the value is then
  // at hand in a register). The result is ready after the loop, earlier
  // than the reduction's own place, and nothing in the loop can use it.
  for (Group& group : groups_) {
    if (group.step != Step::kReduce) continue;
    const Operand& o = g_.node(group.nodes.front()).operands.at(0);
    if (o.is_literal() || !in_kernel(kernel_, o.node) || !space_.per_element(o.node)) continue;
    const int loop = group_of_[static_cast<size_t>(o.node)];
    if (groups_[static_cast<size_t>(loop)].step != Step::kLoop) continue;
    groups_[static_cast<size_t>(loop)].reductions.push_back(group.nodes.front());
    group_of_[static_cast<size_t>(group.nodes.front())] = loop;
    group.step = Step::kAttached;
  }
  // Arrays: dropout results, per-element values used outside their loop
  // (unless each later loop that needs one computes it again), and
  // streamed outputs unless they go out a block at a time. Twice:
  // the first walk finds the arrays; the second computes again only what
  // is in none of them (a value kept anyway is read back).
  for (int32_t id : kernel.writes) {
    if (space_.per_element(id) && streams_from_array(id)) need_array(id);
  }
  for (int walk = 0; walk < 2; ++walk) {
    for (Group& group : groups_) group.recomputed.clear();
    for (size_t gi = 0; gi < groups_.size(); ++gi) {
      if (groups_[gi].step == Step::kAttached) continue;  // its operand is in its loop
      for (int32_t id : groups_[gi].nodes) {
        if (groups_[gi].step == Step::kDropout) need_array(id);
        if (groups_[gi].step == Step::kDropout || groups_[gi].step == Step::kReduce) {
          const Operand& o = g_.node(id).operands.at(0);
          if (!o.is_literal() && !in_kernel(kernel_, o.node)) whole_array_reads_.insert(o.node);
        }
        for (const Operand& o : g_.node(id).operands) {
          if (o.is_literal() || !in_kernel(kernel_, o.node) || !space_.per_element(o.node)) continue;
          if (group_of_[static_cast<size_t>(o.node)] == static_cast<int>(gi) && groups_[gi].step == Step::kLoop)
            continue;
          if (groups_[gi].step == Step::kLoop) {
            make_available(o.node, gi);
          } else {
            need_array(o.node);
          }
        }
      }
    }
  }
  const auto in_kernel_order = [&](int32_t a, int32_t b) {
    return std::find(kernel.nodes.begin(), kernel.nodes.end(), a) < std::find(kernel.nodes.begin(), kernel.nodes.end(), b);
  };
  // Values computed again in kernel order too: one computed again from
  // another comes after it.
  for (Group& group : groups_) std::sort(group.recomputed.begin(), group.recomputed.end(), in_kernel_order);
  std::sort(arrays_.begin(), arrays_.end(), in_kernel_order);
}

void ElementLoops::need_array(int32_t id) {
  if (array_set_.insert(id).second) arrays_.push_back(id);
}

void ElementLoops::make_available(int32_t id, size_t gi) {
  if (array_set_.contains(id)) return;
  if (!recomputable(id)) {
    need_array(id);
    return;
  }
  std::vector<int32_t>& again = groups_[gi].recomputed;
  if (std::find(again.begin(), again.end(), id) != again.end()) return;
  again.push_back(id);
  for (const Operand& o : g_.node(id).operands) {
    if (o.is_literal() || !in_kernel(kernel_, o.node) || !space_.per_element(o.node)) continue;
    make_available(o.node, gi);
  }
}

bool ElementLoops::recomputable(int32_t id) const {
  const Node& n = g_.node(id);
  const OpInfo& info = n.info();
  if (info.kind != OpKind::kUnary && info.kind != OpKind::kBinary) return false;
  if (info.cost_class != CostClass::kSimple || info.flops > 1) return false;
  if (groups_[static_cast<size_t>(group_of_[static_cast<size_t>(id)])].step != Step::kLoop) return false;
  // A 16-bit value rounded where it is computed (stored and used again)
  // takes its bits from that rounding: not written a second way.
  if (emit::rounds_in_kernel(g_, kernel_, id)) return false;
  // At most one element loaded (from a read, an array or a value computed
  // again in turn): then computing it again costs a load and an op, where
  // an array costs the same load and a store. x + residual, two loads,
  // measured slower computed again than kept in an array.
  int loads = 0;
  for (const Operand& o : n.operands) {
    if (!o.is_literal() && space_.per_element(o.node)) ++loads;
  }
  return loads <= 1;
}

bool ElementLoops::per_element_operand(const Node& n) const {
  const Operand& o = n.operands[0];
  return !o.is_literal() && space_.per_element(o.node);
}

std::string ElementLoops::array_name(const Graph& graph, int32_t id) { return "a_" + graph.node(id).name; }

bool ElementLoops::widens_in_loop(int32_t read) const {
  return space_.widen_reads_in_loop && g_.node(read).dtype != DType::kF32 && !whole_array_reads_.contains(read);
}

std::vector<std::string> ElementLoops::operands_of(const Node& n, const Group& group) const {
  std::vector<std::string> operands;
  for (const Operand& o : n.operands) operands.push_back(operand(o, group));
  return operands;
}

// The operand as seen from inside `group`: a local of the same loop, an
// array element, or one value.
std::string ElementLoops::operand(const Operand& o, const Group& group) const {
  if (o.is_literal()) return "";
  if (!in_kernel(kernel_, o.node)) {
    if (!space_.per_element(o.node)) return read_name(g_, o.node);
    const std::string element = read_name(g_, o.node) + "[c]";
    return widens_in_loop(o.node) ? "fj_to_float(" + element + ")" : element;
  }
  if (!space_.per_element(o.node)) return value_name(g_, o.node);
  const bool same_loop =
      group.step == Step::kLoop &&
      (std::find(group.nodes.begin(), group.nodes.end(), o.node) != group.nodes.end() ||
       std::find(group.recomputed.begin(), group.recomputed.end(), o.node) != group.recomputed.end());
  return same_loop ? value_name(g_, o.node) : array_name(g_, o.node) + "[c]";
}

void ElementLoops::write_loop(SourceWriter& w, const Group& group, bool last) const {
  const bool streams_here =
      std::any_of(group.nodes.begin(), group.nodes.end(), [&](int32_t id) { return streams_by_block(id); });
  if (!group.reductions.empty() || streams_here || (last && !space_.per_block_requests.empty())) {
    write_blocked_loop(w, group, last);
    return;
  }
  w.open("for (long long c = 0; c < {}; ++c)", space_.count);
  write_loop_body(w, group, "", false);
  w.close();
}

// The loop in blocks of kCpuReduceLanes elements, then the tail.
// Reductions: element c + j feeds lane j of each reduction's accumulator,
// and the lanes are combined at the end by fj_lanes_total: fj_reduce_span's
// order exactly. A block's values go to a float[32] (`omp simd`, as kernels
// compile with -fopenmp-simd, vectorizes the block: without it the
// compiler may not reorder a float sum), which fj_lanes_combine combines
// into accumulators held in vector registers. Streamed outputs: each
// block's values go out with fj_stream_block (from their array when they
// have one), the tail's with plain stores.
void ElementLoops::write_blocked_loop(SourceWriter& w, const Group& group, bool last) const {
  constexpr int kLanes = kCpuReduceLanes;
  std::vector<int32_t> streams_out;
  for (int32_t id : group.nodes) {
    if (streams_by_block(id)) streams_out.push_back(id);
  }
  // fj_lanes_combine, fj_lanes_store and fj_stream_block move kFjReduceLanes floats.
  w.line("static_assert(kFjReduceLanes == {}, \"the emitter's lanes are the helpers'\");", kLanes);
  for (int32_t id : group.reductions) {
    const Node& n = g_.node(id);
    w.line("fj_lanes lanes_{} = fj_lanes_fill({});", n.name, reduce_identity(n));
    w.line("float acc_{}[{}];", n.name, kLanes);
  }
  w.open("");
  w.line("long long c0 = 0;");
  w.open("for (; c0 + {0} <= {1}; c0 += {0})", kLanes, space_.count);
  if (last) {
    for (const std::string& request : space_.per_block_requests) w.line("{}", request);
  }
  for (int32_t id : group.reductions) w.line("float step_{}[{}];", g_.node(id).name, kLanes);
  for (int32_t id : streams_out) {
    if (!array_set_.contains(id)) w.line("float out_{}[{}];", g_.node(id).name, kLanes);
  }
  w.line("#pragma omp simd");
  w.open("for (int j = 0; j < {}; ++j)", kLanes);
  w.line("const long long c = c0 + j;");
  write_loop_body(w, group, "step_{0}[j] = {1};", true);
  w.close();
  for (int32_t id : group.reductions) {
    const Node& n = g_.node(id);
    w.line("fj_lanes_combine(lanes_{0}, step_{0}, fj_combine_{0}());", n.name);
  }
  for (int32_t id : streams_out) {
    w.line("fj_stream_block({} + {} + c0, {});", param_name(g_, id), space_.first_index,
           array_set_.contains(id) ? array_name(g_, id) + " + c0" : "out_" + g_.node(id).name);
  }
  w.close();
  for (int32_t id : group.reductions) w.line("fj_lanes_store(lanes_{0}, acc_{0});", g_.node(id).name);
  if (space_.constant_count < 0 || space_.constant_count % kLanes != 0) {
    w.open("for (int j = 0; c0 + j < {}; ++j)", space_.count);
    w.line("const long long c = c0 + j;");
    write_loop_body(w, group, "acc_{0}[j] = fj_combine_{0}()(acc_{0}[j], {1});", false);
    w.close();
  }
  w.close();
  for (int32_t id : group.reductions) {
    const Node& n = g_.node(id);
    w.line("const float total_{0} = fj_lanes_total(acc_{0}, fj_combine_{0}());", n.name);
    write_reduce_result(w, id, "total_" + n.name);
  }
}

void ElementLoops::write_reduce_result(SourceWriter& w, int32_t id, const std::string& total) const {
  const Node& n = g_.node(id);
  const std::string divide = n.info().reduce_divides_by_count ? fmt::format(" / (float){}", space_.count) : "";
  w.line("const float {} = {};", value_name(g_, id), emit::as_computed(g_, kernel_, id, total + divide));
}

// The conversions between f32 and the bits of a 16-bit dtype (fj_types.h).
struct BitsConversion {
  const char* to_bits;
  const char* from_bits;
};
static std::optional<BitsConversion> bits_conversion(DType dtype) {
  switch (dtype) {
    case DType::kF16:
      return BitsConversion{"fj_float_to_half_bits", "fj_half_bits_to_float"};
    case DType::kBF16:
      return BitsConversion{"fj_float_to_bf16_bits", "fj_bf16_bits_to_float"};
    case DType::kF32:
      break;
  }
  return std::nullopt;
}

void ElementLoops::write_loop_body(SourceWriter& w, const Group& group, std::string_view reduction_step,
                                   bool in_block) const {
  const std::string element_index = fmt::format("(unsigned long long)({} + c)", space_.first_index);
  for (int32_t id : group.recomputed) {
    const Node& n = g_.node(id);
    const std::vector<std::string> operands = operands_of(n, group);
    w.line("const float {} = {};  // computed again: cheaper than an array", value_name(g_, id),
           node_expression(g_, id, operands, element_index));
  }
  for (int32_t id : group.nodes) {
    const Node& n = g_.node(id);
    const std::vector<std::string> operands = operands_of(n, group);
    const std::string expression = node_expression(g_, id, operands, element_index);
    const std::string value = value_name(g_, id);
    // A streamed value leaves a block at a time (write_blocked_loop), but
    // the tail's elements are stored here.
    const bool block_streams = in_block && streams_by_block(id);
    const bool stored_here = written(id) && !block_streams && !streams_from_array(id);
    const std::optional<BitsConversion> bits = bits_conversion(n.dtype);
    // A 16-bit value that is both stored and used by other nodes is rounded
    // once, to the bits it is stored as, and widened from them. Rounding
    // (fj_round_bf16) and then converting again for the store did the
    // rounding twice, which was 40% of the time of residual_layernorm's
    // fused row kernel. Bits in a uint16_t, not an fj_bf16: a struct local
    // in the loop kept GCC from vectorizing it (5.7x slower).
    std::string stored = fmt::format("fj_from_float<{}>({})", storage_type(n.dtype), value);
    if (stored_here && bits && emit::rounds_in_kernel(g_, kernel_, id)) {
      const std::string stored_bits = emit::bits_name(g_, id);
      w.line("const uint16_t {} = {}({});", stored_bits, bits->to_bits, expression);
      w.line("const float {} = {}({});", value, bits->from_bits, stored_bits);
      stored = fmt::format("{}{{{}}}", storage_type(n.dtype), stored_bits);
    } else {
      w.line("const float {} = {};", value, emit::as_computed(g_, kernel_, id, expression));
    }
    if (array_set_.contains(id)) {
      w.line("{}[c] = {};", array_name(g_, id), value);
    } else if (block_streams) {
      w.line("out_{}[j] = {};", n.name, value);
    }
    if (stored_here) w.line("{}[{} + c] = {};", param_name(g_, id), space_.first_index, stored);
  }
  for (int32_t id : group.reductions) {
    const Node& n = g_.node(id);
    w.line(fmt::runtime(reduction_step), n.name, operand(n.operands.at(0), group));
  }
}

bool ElementLoops::written(int32_t id) const {
  return std::find(kernel_.writes.begin(), kernel_.writes.end(), id) != kernel_.writes.end();
}

bool ElementLoops::streamed(int32_t id) const { return written(id) && space_.streams && space_.streams(id); }
bool ElementLoops::streams_by_block(int32_t id) const { return space_.stream_in_blocks && streamed(id); }
bool ElementLoops::streams_from_array(int32_t id) const { return !space_.stream_in_blocks && streamed(id); }

void ElementLoops::write(SourceWriter& w) const {
  const Group* last_loop = nullptr;
  for (const Group& group : groups_) {
    if (group.step == Step::kLoop) last_loop = &group;
  }
  for (const Group& group : groups_) {
    if (group.step == Step::kAttached) continue;  // written with its loop
    const int32_t id = group.nodes.front();
    const Node& n = g_.node(id);
    const std::vector<std::string> operands = operands_of(n, group);
    auto array_of = [](const std::string& element) { return element.substr(0, element.size() - 3); };  // "x[c]"
    switch (group.step) {
      case Step::kLoop: write_loop(w, group, &group == last_loop); break;
      case Step::kAttached:  // skipped above
        break;
      case Step::kScalar:
        w.line("const float {} = {};", value_name(g_, id),
               emit::as_computed(g_, kernel_, id,
                                 node_expression(g_, id, operands, fmt::format("(unsigned long long)({})", space_.single_index))));
        break;
      case Step::kDropout:
        w.line("{};", dropout_span_call(n, array_of(operands[0]), array_name(g_, id), space_.count,
                                        fmt::format("(unsigned long long)({})", space_.first_index)));
        if (emit::rounds_in_kernel(g_, kernel_, id)) {
          w.line("for (long long c = 0; c < {0}; ++c) {1}[c] = fj_round_{2}({1}[c]);", space_.count,
                 array_name(g_, id), dtype_name(n.dtype));
        }
        break;
      case Step::kReduce: {
        if (!operands[0].ends_with("[c]")) {  // a row of one element: the element itself
          w.line("const float {} = {};", value_name(g_, id),
                 emit::as_computed(g_, kernel_, id, reduce_combine(n, reduce_identity(n), operands[0])));
          break;
        }
        write_reduce_result(w, id,
                            fmt::format("fj_reduce_span({}, {}, {}, fj_combine_{}())", array_of(operands[0]),
                                        space_.count, reduce_identity(n), n.name));
        break;
      }
    }
  }
  write_stores_of_arrays(w);
}

// Written values computed outside a loop (dropout results) are stored from
// their arrays, and so are streamed values that do not go out by blocks;
// per-row values are the row emitter's business.
void ElementLoops::write_stores_of_arrays(SourceWriter& w) const {
  for (int32_t id : kernel_.writes) {
    if (!space_.per_element(id)) continue;
    const Group& group = groups_[static_cast<size_t>(group_of_[static_cast<size_t>(id)])];
    if (group.step == Step::kLoop && !streams_from_array(id)) continue;  // stored by its loop
    w.line("{}({} + {}, {}, {});", streamed(id) ? "fj_stream_span" : "fj_store_span", param_name(g_, id),
           space_.first_index, array_name(g_, id), space_.count);
  }
}

}  // namespace fusejit::cpu_emit
