#include "ir/interpreter.h"

#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cmath>
#include <new>
#include <span>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "ir/available_memory.h"
#include "ir/builder.h"
#include "ir/error.h"
#include "ir/interpreter_kernels.h"
#include "ir/interpreter_parallel.h"
#include "ir/summation_order.h"
#include "ir/verifier.h"

namespace fusejit {
namespace {

using detail::RoundTo;

// A node's values: its own, or borrowed (graph inputs, rows of an outer tensor).
struct Buffer {
  const double* data = nullptr;
  std::vector<double> owned;
};

// Freed intermediates, kept for reuse: a chain of same-shaped ops then
// recycles two or three buffers instead of paying the page faults and
// zeroing of a fresh allocation per op.
class BufferPool {
 public:
  // A pool that refuses a new buffer beyond the memory available throws
  // OutOfHostMemory (not from a parallel_for body, which must not throw).
  explicit BufferPool(bool refuse_beyond_available = true) : refuse_beyond_available_(refuse_beyond_available) {}

  // A buffer of n values for `node` (named when one is refused).
  std::vector<double> take(int64_t n, const Node* node = nullptr) {
    auto best = free_.end();
    for (auto it = free_.begin(); it != free_.end(); ++it) {
      const auto size = static_cast<int64_t>(it->size());
      if (size == n) {
        best = it;
        break;
      }
      // A larger buffer will do if it is not wastefully larger.
      if (size > n && size <= 2 * n && (best == free_.end() || size < static_cast<int64_t>(best->size()))) best = it;
    }
    if (best == free_.end()) {
      const uint64_t bytes = static_cast<uint64_t>(n) * sizeof(double);
      if (refuse_beyond_available_ && !host_allocation_fits(bytes)) {  // the message only when refused
        const std::string refused =
            host_allocation_refusal(bytes, fmt::format("the reference interpreter's float64 result for {}",
                                                       node != nullptr ? describe(*node) : "a node"));
        if (!refused.empty()) throw OutOfHostMemory(refused);
      }
      return std::vector<double>(n);
    }
    std::vector<double> buffer = std::move(*best);
    free_.erase(best);
    buffer.resize(n);
    return buffer;
  }
  void give(std::vector<double>&& buffer) {
    if (!buffer.empty()) free_.push_back(std::move(buffer));
    buffer = {};
  }

 private:
  bool refuse_beyond_available_;
  std::vector<std::vector<double>> free_;
};

// One evaluation of a graph. round[i] says whether node i's result is rounded
// to its dtype; keep[i] whether its values must survive the run (the others
// are freed after their last consumer). Input buffers are set by the caller.
struct Evaluation {
  const Graph& graph;
  std::span<const char> round;
  std::span<const char> keep;
  std::vector<Buffer>& buffers;
  int threads;
  BufferPool& pool;
  double perturbation = 0;
  uint64_t perturbation_seed = 0;
  bool float32_intermediates = false;  // InterpretOptions::float32_intermediates
  // When not null, per node: 1.0 for each element with more than one right
  // float32 value (summation order, multiply-adds), else 0.0; empty where none has
  // (InterpretOptions::order_dependent). Doubles, so that the elementwise
  // loops that broadcast values broadcast the flags too.
  std::vector<std::vector<double>>* flags = nullptr;
  int32_t current = -1;  // the node being evaluated, for error messages
};

void run(Evaluation& ev);

const double* operand_data(const Evaluation& ev, const Operand& o) { return ev.buffers[o.node].data; }

// Composites are evaluated through their expansion, in float64, and rounded
// once at the end as the outer graph's mode says. Every composite works row
// by row (its parameters are vectors over the last dimension), so the
// expansion runs on blocks of rows: its temporaries stay small and in cache,
// and blocks run in parallel. Each block sees exactly the values the whole
// tensor would, so blocking changes no result.
void eval_composite(Evaluation& ev, int32_t id, double* out, RoundTo round) {
  const Node& node = ev.graph.node(id);
  const Node& x = ev.graph.node(node.operands[0].node);
  const int64_t len = x.shape.last();
  const int64_t rows = x.shape.numel() / len;
  const int64_t block = std::clamp<int64_t>((int64_t{1} << 15) / len, 1, rows);

  auto build = [&](int64_t block_rows) {
    Graph sub;
    std::vector<Value> args;
    args.push_back(sub.input("x", x.dtype, {block_rows, len}));
    for (size_t i = 1; i < node.operands.size(); ++i) {
      const Node& p = ev.graph.node(node.operands[i].node);
      args.push_back(sub.input(fmt::format("param{}", i), p.dtype, p.shape));
    }
    const Value result = node.info().expand(args, node.attrs);
    return std::pair<Graph, int32_t>(std::move(sub), result.id());
  };
  const auto full = build(block);
  const auto tail = rows % block != 0 ? build(rows % block) : full;

  const double* xdata = operand_data(ev, node.operands[0]);
  const int64_t blocks = (rows + block - 1) / block;
  // Order-dependent elements: the expansion's own, and those of operands.
  std::vector<double> out_flags;
  std::atomic<bool> any_flag{false};
  if (ev.flags != nullptr) out_flags.assign(static_cast<size_t>(node.shape.numel()), 0.0);
  detail::parallel_for(blocks, 1, ev.threads, [&](int64_t begin, int64_t end) {
    BufferPool pool(/*refuse_beyond_available=*/false);  // one per thread, shared by its blocks of a few rows
    for (int64_t blk = begin; blk < end; ++blk) {
      const int64_t first_row = blk * block;
      const auto& [sub, result] = std::min(rows - first_row, block) == block ? full : tail;
      std::vector<char> sub_round(sub.num_nodes(), 0), sub_keep(sub.num_nodes(), 0);
      for (int32_t i = 0; i < sub.num_nodes(); ++i) sub_round[i] = sub.node(i).op == Op::kCast;
      sub_keep[result] = 1;
      std::vector<Buffer> sub_buffers(sub.num_nodes());
      sub_buffers[0].data = xdata + first_row * len;
      for (size_t i = 1; i < node.operands.size(); ++i) sub_buffers[i].data = operand_data(ev, node.operands[i]);
      Evaluation inner{sub, sub_round, sub_keep, sub_buffers, /*threads=*/1, pool, 0, 0, ev.float32_intermediates};
      std::vector<std::vector<double>> sub_flags;
      if (ev.flags != nullptr) {
        sub_flags.resize(sub.num_nodes());
        if (const std::vector<double>& f = (*ev.flags)[node.operands[0].node]; !f.empty()) {
          sub_flags[0].assign(f.begin() + first_row * len, f.begin() + (first_row + sub.node(0).shape[0]) * len);
        }
        for (size_t i = 1; i < node.operands.size(); ++i) sub_flags[i] = (*ev.flags)[node.operands[i].node];
        inner.flags = &sub_flags;
      }
      run(inner);
      detail::copy_rounded(sub_buffers[result].data, sub.node(result).shape.numel(), out + first_row * len, round, 1);
      if (ev.flags != nullptr && !sub_flags[result].empty()) {
        std::copy(sub_flags[result].begin(), sub_flags[result].end(), out_flags.begin() + first_row * len);
        any_flag = true;
      }
      for (Buffer& b : sub_buffers) pool.give(std::move(b.owned));
    }
  });
  if (any_flag) (*ev.flags)[id] = std::move(out_flags);
}

void eval_node_values(Evaluation& ev, int32_t id, double* out, RoundTo round);

// The magnitude a float32 rounding error of each element of reduction or
// matmul `node` scales with: the same op over the absolute values of its
// operands (the sum of |terms|, the shape of its error bound), not the
// result, which cancellation can make arbitrarily small. Empty for other ops:
// their error scales with the result itself.
std::vector<double> error_scale(Evaluation& ev, const Node& node) {
  const OpKind kind = node.info().kind;
  if (kind != OpKind::kReduce && kind != OpKind::kMatmul) return {};
  std::vector<std::vector<double>> abs_operands;
  for (const Operand& o : node.operands) {
    const double* x = operand_data(ev, o);
    std::vector<double> a(x, x + ev.graph.node(o.node).shape.numel());
    for (double& v : a) v = std::fabs(v);
    abs_operands.push_back(std::move(a));
  }
  std::vector<double> scale(static_cast<size_t>(node.shape.numel()));
  const Shape& a = ev.graph.node(node.operands[0].node).shape;
  if (kind == OpKind::kReduce) {
    detail::eval_reduce(node.info(), abs_operands[0].data(), a.numel() / a.last(), a.last(), scale.data(), std::nullopt,
                        ev.threads);
  } else {
    const Shape& b = ev.graph.node(node.operands[1].node).shape;
    detail::eval_matmul(abs_operands[0].data(), abs_operands[1].data(), a.numel() / a.last(), a.last(), b[1],
                        scale.data(), std::nullopt, ev.threads);
  }
  // A float32 sum of n terms, accumulated in a few lanes or a tree, is off
  // by about sqrt(n) roundings of the running sums, not one: a row of 4097
  // f16 values through rms_norm, or a matmul over 256 products, moved the
  // kernel's result past a perturbation of one rounding.
  const double terms = std::sqrt(static_cast<double>(a.last()));
  for (double& v : scale) v *= terms;
  return scale;
}

// Evaluates node `id` into `out`, rounded where ev.round says. With a
// perturbation, the values are perturbed first and rounded afterwards, as a
// kernel's float32 error would be.
void eval_node(Evaluation& ev, int32_t id, double* out) {
  const Node& node = ev.graph.node(id);
  const RoundTo round = ev.round[id]                ? RoundTo(node.dtype)
                        : ev.float32_intermediates ? RoundTo(DType::kF32)
                                                   : std::nullopt;
  if (ev.perturbation <= 0 || node.op == Op::kCast) return eval_node_values(ev, id, out, round);
  eval_node_values(ev, id, out, std::nullopt);
  const std::vector<double> scale = error_scale(ev, node);
  const int64_t n = node.shape.numel();
  const uint64_t stream = splitmix64_mix(ev.perturbation_seed ^ splitmix64_mix(static_cast<uint64_t>(id) + 1));
  for (int64_t i = 0; i < n; ++i) {
    const uint64_t bits = splitmix64_mix(stream + static_cast<uint64_t>(i));
    const double u = static_cast<double>(bits >> 11) * 0x1p-52 - 1.0;  // uniform in [-1, 1)
    const double magnitude = scale.empty() ? out[i] : scale[static_cast<size_t>(i)];
    if (std::isfinite(magnitude)) out[i] += ev.perturbation * u * magnitude;
  }
  detail::copy_rounded(out, n, out, round, ev.threads);
}

// A binary node's operands as its loop reads them; a literal reads as a
// rank-0 tensor (stride 0 in every dimension) holding literals[i].
std::array<detail::ElementwiseOperand, 2> binary_operands(const Evaluation& ev, const Node& node, double literals[2]) {
  std::array<detail::ElementwiseOperand, 2> operands;
  for (size_t i = 0; i < 2; ++i) {
    const Operand& o = node.operands[i];
    literals[i] = o.literal_value();
    operands[i] = o.is_literal() ? detail::ElementwiseOperand{&literals[i], Shape{}}
                                 : detail::ElementwiseOperand{operand_data(ev, o), ev.graph.node(o.node).shape};
  }
  return operands;
}

void eval_node_values(Evaluation& ev, int32_t id, double* out, RoundTo round) {
  const Node& node = ev.graph.node(id);
  const OpInfo& info = node.info();
  const int64_t n = node.shape.numel();
  auto tensor = [&](int i) { return operand_data(ev, node.operands[i]); };
  switch (info.kind) {
    case OpKind::kInput: return;  // set by the caller
    case OpKind::kUnary: return detail::eval_unary(info.unary, node.attrs, tensor(0), n, out, round, ev.threads);
    case OpKind::kBinary: {
      double literals[2];
      const auto operands = binary_operands(ev, node, literals);
      return detail::eval_binary(info.binary, operands[0], operands[1], node.shape, out, round, ev.threads);
    }
    case OpKind::kCast: return detail::eval_cast(tensor(0), n, node.dtype, out, ev.threads);
    case OpKind::kDropout: {
      const auto seed = static_cast<uint64_t>(node.attrs.get_int("seed"));
      return detail::eval_dropout(tensor(0), n, node.attrs.get_float("p"), seed, out, round, ev.threads);
    }
    case OpKind::kReduce: {
      const Shape& in = ev.graph.node(node.operands[0].node).shape;
      return detail::eval_reduce(info, tensor(0), in.numel() / in.last(), in.last(), out, round, ev.threads,
                                 /*float32_sum=*/ev.float32_intermediates);
    }
    case OpKind::kComposite: return eval_composite(ev, id, out, round);
    case OpKind::kMatmul: {
      const Shape& a = ev.graph.node(node.operands[0].node).shape;
      const Shape& b = ev.graph.node(node.operands[1].node).shape;
      return detail::eval_matmul(tensor(0), tensor(1), a.numel() / a.last(), a.last(), b[1], out, round, ev.threads);
    }
  }
}

// Flags the elements of node `id` with more than one right float32 value
// (Evaluation::flags): sums whose order matters, products a multiply-add
// can keep, and whatever a flagged element reaches. Composites flag theirs
// in eval_composite.
void flag_node(Evaluation& ev, int32_t id) {
  const Node& node = ev.graph.node(id);
  std::vector<std::vector<double>>& flags = *ev.flags;
  auto operand_flags = [&](size_t i) -> const double* {
    const Operand& o = node.operands[i];
    return o.is_literal() || flags[o.node].empty() ? nullptr : flags[o.node].data();
  };
  auto operand_shape = [&](size_t i) -> const Shape& { return ev.graph.node(node.operands[i].node).shape; };
  const int64_t n = node.shape.numel();
  std::vector<double> out;
  bool any = false;
  switch (node.info().kind) {
    case OpKind::kInput:
    case OpKind::kComposite: return;
    case OpKind::kUnary:
    case OpKind::kCast:
    case OpKind::kDropout:
      if (const double* f = operand_flags(0)) {
        out.assign(f, f + n);
        any = true;
      }
      break;
    case OpKind::kBinary: {
      auto either = [](double a, double b) { return a != 0 || b != 0 ? 1.0 : 0.0; };
      if (operand_flags(0) != nullptr || operand_flags(1) != nullptr) {
        static constexpr double kUnflagged = 0;
        detail::ElementwiseOperand operands[2];
        for (size_t i = 0; i < 2; ++i) {
          const double* f = operand_flags(i);
          operands[i] = f != nullptr ? detail::ElementwiseOperand{f, operand_shape(i)}
                                     : detail::ElementwiseOperand{&kUnflagged, Shape{}};
        }
        out.resize(static_cast<size_t>(n));
        detail::eval_binary(either, operands[0], operands[1], node.shape, out.data(), std::nullopt, ev.threads);
        any = true;
      }
      // A product that overflows float32 by less than FLT_MAX: a kernel may
      // fuse it with the addition that consumes it (NVRTC contracts x * y +
      // acc into one multiply-add), which keeps it exact, and the addition
      // may then bring it back into range.
      if (node.op == Op::kMul) {
        double literals[2];
        const auto operands = binary_operands(ev, node, literals);
        std::vector<double> rescuable(static_cast<size_t>(n));
        detail::eval_binary(detail::flag_rescuable_product, operands[0], operands[1], node.shape, rescuable.data(),
                            std::nullopt, ev.threads);
        if (std::find(rescuable.begin(), rescuable.end(), 1.0) != rescuable.end()) {
          if (out.empty()) out.assign(static_cast<size_t>(n), 0.0);
          for (size_t i = 0; i < out.size(); ++i) out[i] = either(out[i], rescuable[i]);
          any = true;
        }
      }
      break;
    }
    case OpKind::kReduce: {
      const Shape& in = operand_shape(0);
      out.resize(static_cast<size_t>(n));
      any = detail::flag_order_dependent_reduce(node.info(), operand_data(ev, node.operands[0]), operand_flags(0),
                                                in.numel() / in.last(), in.last(), out.data(), ev.threads);
      break;
    }
    case OpKind::kMatmul: {
      const Shape& a = operand_shape(0);
      out.resize(static_cast<size_t>(n));
      any = detail::flag_order_dependent_matmul(
          operand_data(ev, node.operands[0]), operand_flags(0), operand_data(ev, node.operands[1]), operand_flags(1),
          a.numel() / a.last(), a.last(), operand_shape(1)[1], out.data(), ev.threads);
      break;
    }
  }
  if (any) flags[id] = std::move(out);
}

void run(Evaluation& ev) {
  const Graph& g = ev.graph;
  // Only nodes that a kept node depends on are evaluated; dead code is skipped.
  std::vector<char> live(ev.keep.begin(), ev.keep.end());
  for (int32_t id = g.num_nodes() - 1; id >= 0; --id) {
    if (!live[id]) continue;
    for (const Operand& o : g.node(id).operands) {
      if (!o.is_literal()) live[o.node] = 1;
    }
  }
  std::vector<int32_t> last_use(g.num_nodes(), -1);
  for (int32_t id = 0; id < g.num_nodes(); ++id) {
    if (!live[id]) continue;
    for (const Operand& o : g.node(id).operands) {
      if (!o.is_literal()) last_use[o.node] = id;
    }
  }
  for (int32_t id = 0; id < g.num_nodes(); ++id) {
    const Node& node = g.node(id);
    if (node.op == Op::kInput || !live[id]) continue;
    ev.current = id;
    Buffer& buffer = ev.buffers[id];
    buffer.owned = ev.pool.take(node.shape.numel(), &node);
    buffer.data = buffer.owned.data();
    eval_node(ev, id, buffer.owned.data());
    if (ev.flags != nullptr) flag_node(ev, id);
    for (const Operand& o : node.operands) {
      if (o.is_literal() || last_use[o.node] != id || ev.keep[o.node]) continue;
      ev.pool.give(std::move(ev.buffers[o.node].owned));
      ev.buffers[o.node].data = nullptr;
      if (ev.flags != nullptr) (*ev.flags)[o.node] = {};
    }
  }
}

std::string expected_text(const Node& n) { return fmt::format("{}{}", n.dtype, n.shape); }

}  // namespace

absl::Status check_inputs(const Graph& graph, const TensorMap& inputs) {
  std::vector<std::string> names;
  for (int32_t id : graph.inputs()) {
    const Node& n = graph.node(id);
    names.push_back(n.name);
    auto it = inputs.find(n.name);
    if (it == inputs.end()) {
      return absl::InvalidArgumentError(fmt::format("missing input '{}' (expected {})", n.name, expected_text(n)));
    }
    const HostTensor& t = it->second;
    if (t.dtype != n.dtype || t.shape != n.shape) {
      return absl::InvalidArgumentError(
          fmt::format("input '{}': expected {}, got {}{}", n.name, expected_text(n), t.dtype, t.shape));
    }
    if (t.numel() != n.shape.numel()) {
      return absl::InvalidArgumentError(fmt::format("input '{}': shape {} needs {} values, the tensor holds {}", n.name,
                                                    t.shape, n.shape.numel(), t.numel()));
    }
    std::atomic<int64_t> bad{t.numel()};
    detail::parallel_for(t.numel(), 1 << 16, detail::reference_threads(), [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) {
        const double v = t.values[i];
        if (!std::isnan(v) && round_to_dtype(v, t.dtype) != v) {
          int64_t seen = bad.load();
          while (i < seen && !bad.compare_exchange_weak(seen, i)) {
          }
          return;
        }
      }
    });
    if (const int64_t i = bad.load(); i < t.numel()) {
      return absl::InvalidArgumentError(
          fmt::format("input '{}': element {} is {:.17g}, which {} cannot represent", n.name, i, t.values[i], t.dtype));
    }
  }
  for (const auto& [name, tensor] : inputs) {
    if (std::find(names.begin(), names.end(), name) == names.end()) {
      return absl::InvalidArgumentError(
          fmt::format("unexpected input '{}': the graph's inputs are {}", name, fmt::join(names, ", ")));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<TensorMap> interpret(const Graph& graph, const TensorMap& inputs, const InterpretOptions& options) {
  if (options.order_dependent != nullptr) options.order_dependent->clear();  // nothing stale, even after an error
  if (absl::Status status = verify(graph); !status.ok()) return status;
  if (absl::Status status = check_inputs(graph, inputs); !status.ok()) return status;
  if (!(options.perturbation >= 0) || !std::isfinite(options.perturbation)) {
    return absl::InvalidArgumentError(
        fmt::format("perturbation {} is not a finite number >= 0 (0: none)", options.perturbation));
  }
  if (options.order_dependent != nullptr && !options.float32_intermediates) {
    return absl::InvalidArgumentError(
        "order_dependent flags float32 sums, so it needs float32_intermediates (InterpretOptions)");
  }

  const int32_t n = graph.num_nodes();
  std::vector<char> round(n, 0), keep(n, 0);
  for (int32_t o : graph.outputs()) keep[o] = 1;
  if (options.rounding == Rounding::kStoredNodes) {
    for (int32_t id : options.stored) {
      if (id < 0 || id >= n) {
        return absl::InvalidArgumentError(fmt::format("stored node id {} is not a node of the graph", id));
      }
      round[id] = 1;
    }
  }
  for (int32_t id = 0; id < n; ++id) {
    const Node& node = graph.node(id);
    if (node.op == Op::kInput) {
      round[id] = 0;  // already exact
    } else if (node.op == Op::kCast || options.rounding == Rounding::kEveryOp ||
               (keep[id] && options.rounding != Rounding::kNone)) {
      round[id] = 1;
    }
  }

  std::vector<Buffer> buffers(n);
  for (int32_t id : graph.inputs()) buffers[id].data = inputs.at(graph.node(id).name).values.data();
  BufferPool pool;
  Evaluation ev{graph, round, keep, buffers, detail::reference_threads(), pool, options.perturbation,
                options.perturbation_seed, options.float32_intermediates};
  std::vector<std::vector<double>> flags;
  if (options.order_dependent != nullptr) {
    flags.resize(n);
    ev.flags = &flags;
  }
  try {
    run(ev);
  } catch (const std::bad_alloc&) {
    return absl::ResourceExhaustedError(
        fmt::format("out of memory evaluating {}", ev.current >= 0 ? describe(graph.node(ev.current)) : "the graph"));
  } catch (const OutOfHostMemory& e) {
    return absl::ResourceExhaustedError(e.what());
  } catch (const Error& e) {  // a composite expansion the builder rejected: a bug, reported, not a crash
    return absl::InternalError(fmt::format("expanding {}: {}", describe(graph.node(ev.current)), e.what()));
  }

  TensorMap outputs;
  for (int32_t id : graph.outputs()) {
    const Node& node = graph.node(id);
    if (outputs.contains(node.name)) continue;
    HostTensor t;
    t.dtype = node.dtype;
    t.shape = node.shape;
    if (!buffers[id].owned.empty()) {
      t.values = std::move(buffers[id].owned);
    } else {
      t.values.assign(buffers[id].data, buffers[id].data + node.shape.numel());
    }
    outputs.emplace(node.name, std::move(t));
    if (options.order_dependent != nullptr && !flags[id].empty()) {
      std::vector<char>& f = (*options.order_dependent)[node.name];
      f.resize(flags[id].size());
      std::transform(flags[id].begin(), flags[id].end(), f.begin(), [](double flag) { return flag != 0; });
    }
  }
  return outputs;
}

TensorMap random_inputs(const Graph& graph, uint64_t seed) {
  TensorMap inputs;
  const std::vector<int32_t> ids = graph.inputs();
  const double physical = static_cast<double>(sysconf(_SC_PHYS_PAGES)) * static_cast<double>(sysconf(_SC_PAGESIZE));
  for (size_t index = 0; index < ids.size(); ++index) {
    const Node& n = graph.node(ids[index]);
    // Input i takes the (i+1)-th output of SplitMix64 started from a mix of
    // the seed. (A symmetric combination such as mix(seed) ^ mix(i + 1) gave
    // seed s's input i the stream of seed i + 1's input s - 1.)
    const uint64_t input_seed =
        splitmix64_mix(splitmix64_mix(seed) + (static_cast<uint64_t>(index) + 1) * 0x9E3779B97F4A7C15ull);
    // More than the machine's memory is refused before asking for it (an
    // allocator may abort rather than fail, as AddressSanitizer's does).
    const std::string what = fmt::format("input {} (8 bytes an element on the host)", describe(n));
    const double bytes = static_cast<double>(n.shape.numel()) * 8.0;
    if (physical > 0 && bytes > physical) {
      throw Error(fmt::format("out of host memory: {} needs {:.0f} MiB, more than the machine's {:.0f} MiB", what,
                              bytes / (1 << 20), physical / (1 << 20)));
    }
    const std::string refused = host_allocation_refusal(static_cast<uint64_t>(n.shape.numel()) * 8, what);
    if (!refused.empty()) throw Error(refused);
    try {
      inputs[n.name] = HostTensor::random_normal(n.dtype, n.shape, input_seed);
    } catch (const std::bad_alloc&) {
      throw Error(fmt::format("out of host memory: {} needs {:.0f} MiB, which could not be allocated", what,
                              bytes / (1 << 20)));
    }
  }
  return inputs;
}

}  // namespace fusejit
