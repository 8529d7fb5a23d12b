#include "fusion/matmul_epilogue.h"

#include <fmt/format.h>

namespace fusejit {
namespace {

MatmulActivation activation_of(const Node& n) {
  if (n.op == Op::kRelu) return MatmulActivation::kRelu;
  if (n.op == Op::kGelu && n.attrs.get_enum("approximate") == "tanh") return MatmulActivation::kGeluTanh;
  return MatmulActivation::kNone;
}

bool reads(const Node& n, int32_t id) {
  for (const Operand& o : n.operands) {
    if (!o.is_literal() && o.node == id) return true;
  }
  return false;
}

// The operand of add node `n` that is not `value`; -1 when both are it or the other is a literal.
int32_t other_operand(const Node& n, int32_t value) {
  if (n.operands.size() != 2) return -1;
  const Operand& a = n.operands[0];
  const Operand& b = n.operands[1];
  if (!a.is_literal() && a.node == value) return b.is_literal() || b.node == value ? -1 : b.node;
  return a.is_literal() ? -1 : a.node;
}

constexpr const char* kWhatItTakes =
    "a matmul kernel's epilogue (cuBLASLt's) takes an add of a bias vector of the result's last extent, then relu "
    "or gelu(approximate=tanh)";

}  // namespace

MatmulEpilogue matmul_epilogue(const Graph& graph, const Kernel& kernel) {
  MatmulEpilogue e;
  if (kernel.kind != KernelKind::kMatmul) return e;
  for (size_t i = 1; i < kernel.nodes.size(); ++i) {
    const int32_t id = kernel.nodes[i];
    const Node& n = graph.node(id);
    if (n.op == Op::kAdd) {
      e.bias_add = id;
      e.bias = other_operand(n, kernel.nodes[i - 1]);
    } else {
      e.activation_node = id;
      e.activation = activation_of(n);
    }
  }
  return e;
}

std::string describe_epilogue(const Graph& graph, const MatmulEpilogue& epilogue) {
  std::string text;
  if (epilogue.bias >= 0) text = fmt::format("bias {}", graph.node(epilogue.bias).name);
  if (epilogue.activation != MatmulActivation::kNone) {
    if (!text.empty()) text += ", ";
    text += epilogue.activation == MatmulActivation::kRelu ? "relu" : "gelu(approximate=tanh)";
  }
  return text;
}

std::string matmul_epilogue_refusal(const Graph& graph, std::span<const int32_t> kernel_nodes, int32_t id,
                                    bool last_used_elsewhere) {
  const Node& mm = graph.node(kernel_nodes.front());
  const int32_t last = kernel_nodes.back();
  const Node& n = graph.node(id);
  const std::string what = fmt::format("{} '{}'", n.info().name, n.name);
  if (!reads(n, last)) return fmt::format("{} does not read {}, the kernel's last value", what, graph.node(last).name);
  const Node& a = graph.node(mm.operands[0].node);
  const Node& b = graph.node(mm.operands[1].node);
  if (a.dtype != b.dtype) {
    return fmt::format(
        "matmul '{}' multiplies {} by {}, and an epilogue needs its operands, bias and result in one "
        "dtype, as cuBLASLt takes them",
        mm.name, a.dtype, b.dtype);
  }
  if (mm.shape.numel() == 0 || a.shape.last() == 0) return fmt::format("matmul '{}' has an empty extent", mm.name);
  const bool has_bias = kernel_nodes.size() > 1 && graph.node(kernel_nodes[1]).op == Op::kAdd;
  const bool has_activation = kernel_nodes.size() > (has_bias ? 2u : 1u);
  if (has_activation) {
    return fmt::format("{} comes after {}, the activation that ends the matmul's epilogue; {}", what,
                       graph.node(last).name, kWhatItTakes);
  }
  if (n.op != Op::kAdd && activation_of(n) == MatmulActivation::kNone) {
    return fmt::format("{}{} is not an epilogue op; {}", what,
                       n.op == Op::kGelu ? " (approximate=none, the erf form)" : "", kWhatItTakes);
  }
  if (n.op == Op::kAdd && has_bias) return fmt::format("{} would be a second add; {}", what, kWhatItTakes);
  if (n.dtype != mm.dtype || !(n.shape == mm.shape)) {
    return fmt::format("{} gives {}{} from the matmul's {}{}; {}", what, n.dtype, n.shape, mm.dtype, mm.shape,
                       kWhatItTakes);
  }
  // cuBLASLt's GELU may evaluate tanh approximately (its documentation does
  // not say; CUTLASS's does, to about 2^-11): below a 16-bit result's
  // rounding, but over f32's tolerance (DESIGN.md section 6). Until a GPU
  // shows otherwise, an f32 GeLU is a kernel of its own.
  if (activation_of(n) == MatmulActivation::kGeluTanh && mm.dtype == DType::kF32) {
    return fmt::format(
        "{} is in f32, and cuBLASLt's GELU is not known to be as exact as f32's tolerance asks; it is "
        "an epilogue in bf16 and f16",
        what);
  }
  if (n.op == Op::kAdd) {
    const int32_t bias = other_operand(n, last);
    if (bias < 0) return fmt::format("{} adds no tensor of its own to the product; {}", what, kWhatItTakes);
    const Node& v = graph.node(bias);
    const int64_t cols = mm.shape.last();
    if (v.shape.numel() != cols || v.shape.last() != cols || v.dtype != mm.dtype) {
      return fmt::format("{} adds {} ({}{}), not a {}[{}] vector; {}", what, v.name, v.dtype, v.shape, mm.dtype, cols,
                         kWhatItTakes);
    }
  }
  if (last_used_elsewhere) {
    return fmt::format("{} is stored (a graph output, or read by another op too), so the epilogue ends with it",
                       graph.node(last).name);
  }
  return "";
}

}  // namespace fusejit
