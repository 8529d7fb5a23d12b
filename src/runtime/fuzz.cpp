#include "runtime/fuzz.h"

#include <algorithm>
#include <random>
#include <regex>
#include <set>
#include <sstream>

#include <absl/strings/str_join.h>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include "codegen/cuda/cuda_emitter.h"
#include "cost/cost_model.h"
#include "fusion/plan_reference.h"
#include "ir/error.h"
#include "ir/host_tensor.h"
#include "ir/text_format.h"
#include "runtime/kernel_cache.h"
#include "runtime/nvrtc_compiler.h"

namespace fusejit {
namespace {

using Shape64 = std::vector<int64_t>;

std::string shape_text(const Shape64& s) { return fmt::format("[{}]", fmt::join(s, ", ")); }

int64_t numel(const Shape64& s) {
  int64_t n = 1;
  for (int64_t e : s) n *= e;
  return n;
}

// NumPy broadcasting of two shapes (which the generator only forms when valid).
Shape64 broadcast(const Shape64& a, const Shape64& b) {
  Shape64 out(std::max(a.size(), b.size()), 1);
  for (size_t i = 0; i < out.size(); ++i) {
    const int64_t ea = i < out.size() - a.size() ? 1 : a[i - (out.size() - a.size())];
    const int64_t eb = i < out.size() - b.size() ? 1 : b[i - (out.size() - b.size())];
    out[i] = std::max(ea, eb);
  }
  return out;
}

class GraphGenerator {
 public:
  explicit GraphGenerator(uint64_t seed) : rng_(seed) {}

  std::string generate() {
    Shape64 base = base_shape();
    Value x = new_input(base);
    values_.push_back(x);
    const int ops = 1 + static_cast<int>(pick(8));
    for (int i = 0; i < ops; ++i) add_op();
    std::vector<std::string> outputs = {values_.back().name};
    const int extra = static_cast<int>(pick(3));
    for (int i = 0; i < extra && values_.size() > 2; ++i) {
      const Value& v = values_[1 + pick(values_.size() - 1)];
      if (std::find(outputs.begin(), outputs.end(), v.name) == outputs.end()) outputs.push_back(v.name);
    }
    std::string text = absl::StrJoin(inputs_, "\n") + "\n" + absl::StrJoin(statements_, "\n") + "\n";
    return text + "output " + absl::StrJoin(outputs, ", ") + "\n";
  }

 private:
  struct Value {
    std::string name;
    Shape64 shape;
  };

  uint64_t pick(uint64_t n) { return std::uniform_int_distribution<uint64_t>(0, n - 1)(rng_); }
  template <typename T>
  const T& choose(std::initializer_list<T> options) {
    return *(options.begin() + pick(options.size()));
  }

  Shape64 base_shape() {
    const int rank = 1 + static_cast<int>(pick(4));
    Shape64 s(static_cast<size_t>(rank));
    for (int d = 0; d + 1 < rank; ++d) s[static_cast<size_t>(d)] = choose<int64_t>({1, 2, 3, 5, 7});
    s.back() = choose<int64_t>({1, 3, 8, 17, 64, 256, 1000, 4097});
    for (size_t d = 0; numel(s) > 65536 && d + 1 < s.size(); ++d) s[d] = 1;
    return s;
  }

  // An input of `dtype`, or of a random one.
  Value new_input(const Shape64& shape, std::string dtype = "") {
    Value v{fmt::format("in{}", inputs_.size()), shape};
    if (dtype.empty()) dtype = choose<std::string>({"f32", "f16", "bf16"});
    inputs_.push_back(fmt::format("input {}: {}{}", v.name, dtype, shape_text(shape)));
    return v;
  }

  void statement(const Shape64& shape, const std::string& call) {
    Value v{fmt::format("v{}", statements_.size()), shape};
    statements_.push_back(fmt::format("{} = {}", v.name, call));
    values_.push_back(v);
  }

  // |x| + 0.5: the operand of an op with a pole or a branch cut (log,
  // sqrt, rsqrt, reciprocal, a divisor, a base of pow). Values near the
  // pole make results whose float32 rounding differs from the float64
  // reference by far more than any tolerance (1 / 1e-4 then summed) without
  // any fault in the generated code; NaN and infinity have tests of their own.
  Value away_from_zero(const Value& x) {
    statement(x.shape, fmt::format("abs({})", x.name));
    const std::string a = values_.back().name;
    statement(x.shape, fmt::format("add({}, 0.5)", a));
    return values_.back();
  }

  // An operand for a binary op with x: a value of the same shape (a
  // diamond), or a new input that broadcasts with x one way or the other.
  Value partner(const Value& x) {
    std::vector<const Value*> same;
    for (const Value& v : values_) {
      if (v.shape == x.shape && v.name != x.name) same.push_back(&v);
    }
    if (!same.empty() && pick(2) == 0) return *same[pick(same.size())];
    Shape64 s = x.shape;
    switch (pick(4)) {
      case 0: s = {x.shape.back()}; break;  // a row vector [N]
      case 1: s.back() = 1; break;          // one value per row [..., 1]
      case 2: s[0] = 1; break;              // broadcast over the outer dimension
      default: break;
    }
    if (x.shape.back() == 1 && pick(2) == 0) s.back() = choose<int64_t>({3, 17, 64});  // [..., 1] with [..., N]
    return new_input(s);
  }

  void add_op() {
    const Value x = pick(2) == 0 ? values_.back() : values_[pick(values_.size())];
    const uint64_t kind = pick(100);
    if (kind < 28) {
      const std::string op = choose<std::string>({"neg", "abs", "exp", "log", "sqrt", "rsqrt", "reciprocal", "square",
                                                  "tanh", "sigmoid", "relu", "silu", "erf", "gelu", "gelu_tanh"});
      if (op == "gelu_tanh") return statement(x.shape, fmt::format("gelu({}, approximate=tanh)", x.name));
      if (op == "log" || op == "sqrt" || op == "rsqrt" || op == "reciprocal") {
        return statement(x.shape, fmt::format("{}({})", op, away_from_zero(x).name));
      }
      return statement(x.shape, fmt::format("{}({})", op, x.name));
    }
    if (kind < 58) {
      const std::string op = choose<std::string>({"add", "sub", "mul", "div", "maximum", "minimum", "pow"});
      if (pick(5) == 0) {  // a literal on either side
        const std::string literal = op == "pow" ? choose<std::string>({"2", "0.5", "3"})
                                                : choose<std::string>({"0.5", "2", "-1.25", "1e-3"});
        if (op == "pow") return statement(x.shape, fmt::format("pow({}, {})", away_from_zero(x).name, literal));
        if (op == "div") return statement(x.shape, fmt::format("div({}, {})", literal, away_from_zero(x).name));
        return statement(x.shape, pick(2) == 0 ? fmt::format("{}({}, {})", op, x.name, literal)
                                               : fmt::format("{}({}, {})", op, literal, x.name));
      }
      Value y = partner(x);
      Value a = x;
      if (pick(2) == 0) std::swap(a, y);
      if (op == "div") y = away_from_zero(y);
      if (op == "pow") a = away_from_zero(a);
      return statement(broadcast(a.shape, y.shape), fmt::format("{}({}, {})", op, a.name, y.name));
    }
    if (kind < 66) {
      Shape64 s = x.shape;
      s.back() = 1;
      return statement(s, fmt::format("{}({})", choose<std::string>({"sum", "mean", "max"}), x.name));
    }
    if (kind < 80) {
      const Shape64 row = {x.shape.back()};
      switch (pick(6)) {
        case 0: return statement(x.shape, fmt::format("layer_norm({})", x.name));
        case 1: {
          const Value g = new_input(row), b = new_input(row);
          return statement(x.shape, fmt::format("layer_norm({}, {}, {}, eps=1e-5)", x.name, g.name, b.name));
        }
        case 2: return statement(x.shape, fmt::format("rms_norm({})", x.name));
        case 3: return statement(x.shape, fmt::format("rms_norm({}, {})", x.name, new_input(row).name));
        case 4: return statement(x.shape, fmt::format("softmax({})", x.name));
        default: return statement(x.shape, fmt::format("log_softmax({})", x.name));
      }
    }
    if (kind < 87) {
      return statement(x.shape, fmt::format("dropout({}, p={}, seed={})", x.name, choose<std::string>({"0.1", "0.5", "0.9"}),
                                            pick(1000)));
    }
    if (kind < 94) {
      return statement(x.shape, fmt::format("cast({}, dtype={})", x.name, choose<std::string>({"f32", "f16", "bf16"})));
    }
    if (x.shape.size() >= 2 && x.shape.back() <= 1000) {
      const int64_t n = choose<int64_t>({1, 3, 16});
      if (numel(x.shape) * n <= (int64_t{1} << 20)) {
        Shape64 s = x.shape;
        s.back() = n;
        if (pick(2) == 0) {
          // A linear layer of one dtype on inputs of x's shape: its bias
          // add and activation are the matmul's epilogue in the fused plan
          // (fusion/matmul_epilogue.h). x's own dtype is not tracked here.
          const std::string dtype = choose<std::string>({"f32", "f16", "bf16"});
          const Value a = new_input(x.shape, dtype), w = new_input({x.shape.back(), n}, dtype);
          const Value b = new_input({n}, dtype);
          statement(s, fmt::format("matmul({}, {})", a.name, w.name));
          const std::string h = values_.back().name;
          statement(s, pick(2) == 0 ? fmt::format("add({}, {})", h, b.name) : fmt::format("add({}, {})", b.name, h));
          if (pick(2) == 0) return;
          const std::string biased = values_.back().name;
          return statement(
              s, pick(2) == 0 ? fmt::format("relu({})", biased) : fmt::format("gelu({}, approximate=tanh)", biased));
        }
        const Value w = new_input({x.shape.back(), n});
        return statement(s, fmt::format("matmul({}, {})", x.name, w.name));
      }
    }
    return statement(x.shape, fmt::format("tanh({})", x.name));
  }

  std::mt19937_64 rng_;
  std::vector<Value> values_;
  std::vector<std::string> inputs_;
  std::vector<std::string> statements_;
};

// ---- shrinking, on the text ----

struct GraphText {
  std::vector<std::string> inputs;      // "input NAME: ..."
  std::vector<std::string> names;       // statement results, in order
  std::vector<std::string> calls;       // "op(args)" of each statement
  std::vector<std::string> outputs;

  static GraphText parse(const std::string& text) {
    GraphText g;
    std::istringstream in(text);
    std::string line;
    static const std::regex kStatement(R"(^(\w+) = (.*)$)");
    while (std::getline(in, line)) {
      std::smatch m;
      if (line.starts_with("input ")) {
        g.inputs.push_back(line);
      } else if (line.starts_with("output ")) {
        std::string list = line.substr(7);
        for (size_t start = 0; start <= list.size();) {
          const size_t comma = std::min(list.find(',', start), list.size());
          std::string name = list.substr(start, comma - start);
          name.erase(0, name.find_first_not_of(' '));
          if (!name.empty()) g.outputs.push_back(name);
          start = comma + 1;
        }
      } else if (std::regex_match(line, m, kStatement)) {
        g.names.push_back(m[1]);
        g.calls.push_back(m[2]);
      }
    }
    return g;
  }

  std::string text() const {
    std::string t;
    for (const std::string& i : inputs) t += i + "\n";
    for (size_t s = 0; s < names.size(); ++s) t += names[s] + " = " + calls[s] + "\n";
    return t + "output " + absl::StrJoin(outputs, ", ") + "\n";
  }

  // The value names a call reads, in order.
  static std::vector<std::string> operands(const std::string& call) {
    std::vector<std::string> out;
    static const std::regex kName(R"([(,]\s*([A-Za-z_]\w*)\s*(?=[,)]))");
    for (auto it = std::sregex_iterator(call.begin(), call.end(), kName); it != std::sregex_iterator(); ++it) {
      out.push_back((*it)[1]);
    }
    return out;
  }

  static std::string rename(const std::string& call, const std::string& from, const std::string& to) {
    const std::regex word("([(,]\\s*)" + from + "(\\s*[,)])");
    return std::regex_replace(call, word, "$1" + to + "$2");
  }

  // Drops statements and inputs nothing reaches from the outputs.
  void remove_dead() {
    std::set<std::string> live(outputs.begin(), outputs.end());
    for (size_t s = names.size(); s-- > 0;) {
      if (live.contains(names[s])) {
        for (const std::string& o : operands(calls[s])) live.insert(o);
      }
    }
    GraphText kept;
    for (const std::string& i : inputs) {
      const std::string name = i.substr(6, i.find(':') - 6);
      if (live.contains(name)) kept.inputs.push_back(i);
    }
    for (size_t s = 0; s < names.size(); ++s) {
      if (live.contains(names[s])) {
        kept.names.push_back(names[s]);
        kept.calls.push_back(calls[s]);
      }
    }
    kept.outputs = outputs;
    *this = std::move(kept);
  }
};

bool verifies(const std::string& text) { return parse_graph(text).ok(); }

}  // namespace

std::string random_graph_text(uint64_t seed) { return GraphGenerator(seed).generate(); }

std::string shrink_graph_text(const std::string& text, const std::function<bool(const std::string&)>& fails) {
  GraphText best = GraphText::parse(text);
  best.remove_dead();
  // A failure that needs the dead statements (values nothing uses) cannot
  // be shrunk by this method: keep the graph as it was.
  if (!fails(best.text())) return text;
  bool progress = true;
  while (progress) {
    progress = false;
    auto accept = [&](GraphText candidate) {
      candidate.remove_dead();
      const std::string t = candidate.text();
      if (candidate.outputs.empty() || !verifies(t) || !fails(t)) return false;
      best = std::move(candidate);
      return true;
    };
    for (size_t o = 0; o < best.outputs.size() && best.outputs.size() > 1 && !progress; ++o) {
      GraphText c = best;
      c.outputs.erase(c.outputs.begin() + static_cast<long>(o));
      progress = accept(std::move(c));
    }
    // Bypass a statement: its users read one of its operands instead.
    for (size_t s = best.names.size(); s-- > 0 && !progress;) {
      for (const std::string& operand : GraphText::operands(best.calls[s])) {
        GraphText c = best;
        const std::string name = c.names[s];
        for (size_t later = s + 1; later < c.names.size(); ++later) {
          c.calls[later] = GraphText::rename(c.calls[later], name, operand);
        }
        for (std::string& out : c.outputs) {
          if (out == name) out = operand;
        }
        c.names.erase(c.names.begin() + static_cast<long>(s));
        c.calls.erase(c.calls.begin() + static_cast<long>(s));
        std::set<std::string> seen;
        c.outputs.erase(std::remove_if(c.outputs.begin(), c.outputs.end(),
                                       [&](const std::string& o) { return !seen.insert(o).second; }),
                        c.outputs.end());
        if ((progress = accept(std::move(c)))) break;
      }
    }
  }
  return best.text();
}

namespace {

// A plan's check: what failed, "" when it passed. Resource exhaustion is
// returned as a status, for check_graph_text to call not_checked.
absl::StatusOr<std::string> check_plan(const FusionPlan& plan, const TensorMap& inputs, const FuzzOptions& options,
                                       int64_t* kernels) {
  if (options.cuda_compile) {
    // The whole plan as one program first (cheap); only when that fails,
    // kernel by kernel, to name the kernel NVRTC rejects.
    const CudaCompileOptions cuda{.arch = options.cuda_arch};
    // Both variants of each kernel: a GPU compiles the scalar one when a
    // buffer is not 16-byte aligned.
    std::vector<CudaKernelSource> sources = emit_cuda(plan);
    for (CudaKernelSource& scalar : emit_cuda(plan, CudaAccess::kScalar)) {
      if (scalar.has_vector_path) sources.push_back(std::move(scalar));
    }
    // A matmul's epilogue as the kernel a GPU runs where cuBLASLt cannot.
    for (int i = 0; i < std::ssize(plan.kernels); ++i) {
      const Kernel& k = plan.kernels[static_cast<size_t>(i)];
      if (k.kind != KernelKind::kMatmul || k.nodes.size() < 2) continue;
      for (CudaAccess access : {CudaAccess::kVector, CudaAccess::kScalar}) {
        CudaKernelSource epilogue = emit_cuda_matmul_epilogue(plan, i, access).source;
        if (access == CudaAccess::kVector || epilogue.has_vector_path) sources.push_back(std::move(epilogue));
      }
    }
    *kernels += static_cast<int64_t>(sources.size());
    if (!compile_cuda(plan.label + "_plan", cuda_plan_program(sources), cuda, &KernelCache::global()).ok()) {
      for (const CudaKernelSource& source : sources) {
        absl::StatusOr<CompiledKernel> compiled = compile_cuda(source.name, source.source, cuda, nullptr);
        if (!compiled.ok()) {
          return fmt::format("{} plan: NVRTC failed on {}: {}", plan.label, source.name,
                             status_text(compiled.status()).substr(0, 2000));
        }
      }
      return fmt::format("{} plan: NVRTC rejects the plan's kernels together, accepts each alone", plan.label);
    }
    // The other launch shapes the CUDA backend may time and keep
    // (cuda_row_shape_candidates): the j-th of every kernel in program j.
    std::vector<std::vector<CudaKernelSource>> shaped;
    for (int i = 0; i < static_cast<int>(plan.kernels.size()); ++i) {
      if (plan.kernels[static_cast<size_t>(i)].kind == KernelKind::kMatmul) continue;
      const std::vector<CudaRowShape> shapes = cuda_row_shape_candidates(plan, i, CudaAccess::kVector);
      for (size_t j = 1; j < shapes.size(); ++j) {
        if (shaped.size() < j) shaped.emplace_back();
        shaped[j - 1].push_back(emit_cuda_kernel(plan, i, CudaAccess::kVector, shapes[j]));
      }
    }
    for (size_t j = 0; j < shaped.size(); ++j) {
      *kernels += static_cast<int64_t>(shaped[j].size());
      const std::string program = fmt::format("{}_plan_shape{}", plan.label, j + 1);
      if (compile_cuda(program, cuda_plan_program(shaped[j]), cuda, &KernelCache::global()).ok()) continue;
      for (const CudaKernelSource& source : shaped[j]) {
        absl::StatusOr<CompiledKernel> compiled = compile_cuda(source.name, source.source, cuda, nullptr);
        if (!compiled.ok()) {
          return fmt::format("{} plan: NVRTC failed on {} launched with {}: {}", plan.label, source.name,
                             cuda_launch_shape(source), status_text(compiled.status()).substr(0, 2000));
        }
      }
    }
  }
  if (options.backend == nullptr) return "";
  // Out of memory (host or device) is the machine's limit, not a mismatch.
  const auto failed = [&](const absl::Status& s) -> absl::StatusOr<std::string> {
    if (absl::IsResourceExhausted(s))
      return absl::ResourceExhaustedError(fmt::format("{} plan: {}", plan.label, status_text(s)));
    return fmt::format("{} plan: {}", plan.label, status_text(s).substr(0, 2000));
  };
  absl::StatusOr<std::unique_ptr<LoadedPlan>> loaded = options.backend->load(plan);
  if (!loaded.ok()) return failed(loaded.status());
  for (const LoadedKernelInfo& k : (*loaded)->kernels()) *kernels += k.executed_by == "jit" ? 1 : 0;
  absl::Status s = (*loaded)->set_inputs(inputs);
  if (s.ok()) s = (*loaded)->poison_outputs();
  if (s.ok()) s = (*loaded)->run();
  if (!s.ok()) return failed(s);
  absl::StatusOr<TensorMap> out = (*loaded)->outputs();
  if (!out.ok()) return failed(out.status());
  absl::StatusOr<std::string> wrong = first_wrong_output(plan, inputs, *out);
  if (!wrong.ok()) return failed(wrong.status());
  if (!wrong->empty()) return fmt::format("{} plan on {}: {}", plan.label, options.backend->name(), *wrong);
  return "";
}

}  // namespace

GraphCheck check_graph_text(const std::string& text, const FuzzOptions& options, int64_t* kernels) {
  absl::StatusOr<Graph> graph = parse_graph(text);
  if (!graph.ok())
    return {.mismatch = fmt::format("the generated graph does not verify: {}", status_text(graph.status())),
            .not_checked = {}};
  try {
    FusionOptions fusion;
    if (options.backend != nullptr) fusion = options.backend->fusion_options();
    // Every fourth graph also takes the re-reading row variant.
    if (std::hash<std::string>()(text) % 4 == 0) fusion.persistent_row_limit = 1024;
    TensorMap inputs;
    try {
      // Fails only for want of memory.
      inputs = options.special_values ? special_value_inputs(*graph, 7) : random_inputs(*graph, 7);
    } catch (const std::exception& e) {
      return {.mismatch = {}, .not_checked = fmt::format("cannot make its inputs: {}", e.what())};
    }
    for (const FusionPlan& plan : {make_unfused_plan(*graph, fusion), make_fused_plan(*graph, fusion)}) {
      absl::StatusOr<std::string> what = check_plan(plan, inputs, options, kernels);
      if (!what.ok()) return {.mismatch = {}, .not_checked = std::string(status_text(what.status()))};
      if (!what->empty()) return {.mismatch = *std::move(what), .not_checked = {}};
    }
  } catch (const std::bad_alloc&) {
    return {.mismatch = {}, .not_checked = "out of host memory"};
  } catch (const std::exception& e) {
    return {.mismatch = fmt::format("exception: {}", e.what()), .not_checked = {}};
  }
  return {};
}

TensorMap special_value_inputs(const Graph& graph, uint64_t seed) {
  TensorMap inputs = random_inputs(graph, seed);
  std::mt19937_64 engine(seed ^ 0x9E3779B97F4A7C15ull);
  constexpr double kInf = std::numeric_limits<double>::infinity();
  for (auto& [name, t] : inputs) {
    // Largest finite, smallest normal, smallest subnormal magnitudes.
    const double limits[3][3] = {{0x1.fffffep127, 0x1p-126, 0x1p-149},  // f32
                                 {65504.0, 0x1p-14, 0x1p-24},           // f16
                                 {0x1.fep127, 0x1p-126, 0x1p-133}};     // bf16
    const double* l = limits[t.dtype == DType::kF32 ? 0 : t.dtype == DType::kF16 ? 1 : 2];
    const double specials[] = {0.0,   -0.0,  kInf,  -kInf, std::numeric_limits<double>::quiet_NaN(),
                               l[0],  -l[0], l[1],  -l[1], l[2],
                               -l[2], 3e38,  -3e38, 1e20,  -1e20};
    // Specials in one row in 4 (a row: along the last dimension), the others
    // left normal: a row with an infinity or NaN often comes out all NaN,
    // which would check little were every row to hold one.
    const int64_t len = t.shape.last();
    for (int64_t row = 0; row < t.shape.numel() / len; ++row) {
      if (engine() % 4 != 0) continue;
      const int64_t at = static_cast<int64_t>(engine() % static_cast<uint64_t>(len));  // at least one
      for (int64_t j = 0; j < len; ++j) {
        if (j != at && engine() % 8 != 0) continue;
        const double s = specials[engine() % std::size(specials)];
        // 3e38 and 1e20 only where the dtype holds them (f16 tops out at 65504).
        if (!std::isfinite(s) || std::fabs(s) <= l[0]) t.values[row * len + j] = round_to_dtype(s, t.dtype);
      }
    }
  }
  return inputs;
}

std::string fuzz_preflight(const FuzzOptions& options) {
  int64_t kernels = 0;
  const GraphCheck c = check_graph_text("input x: f32[4, 33]\ny = gelu(x)\noutput y\n", options, &kernels);
  return c.passed() ? "" : c.mismatch + c.not_checked;
}

FuzzResult run_fuzz(const FuzzOptions& options) {
  FuzzResult result;
  const auto stop = [&] { return options.stop_requested && options.stop_requested(); };
  for (int i = 0; i < options.graphs; ++i) {
    if (stop()) break;
    // Graph i of a run from seed S is graph 0 of a run from S + i, so that
    // one number reproduces a failure (FuzzFailure::seed).
    const uint64_t seed = options.seed + static_cast<uint64_t>(i);
    const std::string text = random_graph_text(splitmix64_mix(seed));
    if (options.progress) options.progress(fmt::format("graph {} of {} (--seed {})", i + 1, options.graphs, seed));
    int64_t kernels = 0;
    const GraphCheck check = check_graph_text(text, options, &kernels);
    if (stop()) break;
    ++result.graphs;
    result.kernels += kernels;
    if (!check.not_checked.empty()) {
      ++result.not_checked;
      const int statements = static_cast<int>(GraphText::parse(text).names.size());
      result.failures.push_back({seed, check.not_checked, text, statements, statements, true});
      if (options.on_failure) options.on_failure(result.failures.back());
    }
    if (check.mismatch.empty()) continue;
    const std::string& what = check.mismatch;
    ++result.mismatches;
    int64_t ignored = 0;
    // A candidate counts as failing only if no stop came while it was
    // checked: the interrupt may have killed its compiler.
    const std::string shrunk = shrink_graph_text(text, [&](const std::string& t) {
      if (stop()) return false;
      const bool fails = !check_graph_text(t, options, &ignored).mismatch.empty();
      return fails && !stop();
    });
    const std::string shrunk_what = check_graph_text(shrunk, options, &ignored).mismatch;
    // Should the shrunk graph pass after all, the original is the reproducer.
    const std::string& reproducer = shrunk_what.empty() ? text : shrunk;
    result.failures.push_back({seed, shrunk_what.empty() ? what : shrunk_what, reproducer,
                               static_cast<int>(GraphText::parse(text).names.size()),
                               static_cast<int>(GraphText::parse(reproducer).names.size())});
    if (options.on_failure) options.on_failure(result.failures.back());
  }
  result.stopped = result.graphs < options.graphs;
  return result;
}

}  // namespace fusejit
