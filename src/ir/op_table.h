// Op identities and their static description (see ops.def for the rows).
#pragma once

#include <cstdint>
#include <span>
#include <string_view>

#include "ir/attrs.h"

namespace fusejit {

class Value;

enum class OpKind : uint8_t {
  kInput,      // a graph input (not an op a user can call)
  kUnary,      // elementwise, one tensor operand
  kBinary,     // elementwise, two operands (tensors or literals), broadcasting
  kCast,       // elementwise dtype change; rounds to the target dtype
  kDropout,    // elementwise, Philox mask by global element index
  kReduce,     // over the last dimension, kept with extent 1
  kComposite,  // one user op defined by its expansion into primitives
  kMatmul,     // [..., M, K] x [K, N]
};

// Ops whose per-element throughput a device measures together. A GeLU
// (erf form) from which only f16 and bf16 values are computed is not its
// op's class but kGelu16Bit: generated code computes it with a shorter
// polynomial and no division, about twice as fast on a CPU
// (Graph::cost_class). Likewise a matmul of two bf16 operands is not
// kMatmul but kMatmulBf16: a CPU with AVX512-BF16 multiplies its pairs of
// bf16 values with one dot-product instruction, at about twice the rate of
// f32 multiply-adds (codegen/cpu/matmul.cpp); a GPU runs both on its
// tensor cores.
enum class CostClass : uint8_t { kSimple, kDivSqrt, kExpLog, kErf, kGelu16Bit, kPow, kPhilox, kMatmul, kMatmulBf16 };
inline constexpr int kNumCostClasses = 9;
std::string_view cost_class_name(CostClass c);

enum class Op : uint8_t {
  kInput,
#define FUSEJIT_UNARY(Enum, ...) k##Enum,
#define FUSEJIT_BINARY(Enum, ...) k##Enum,
#define FUSEJIT_SPECIAL(Enum, ...) k##Enum,
#define FUSEJIT_REDUCE(Enum, ...) k##Enum,
#define FUSEJIT_COMPOSITE(Enum, ...) k##Enum,
#include "ir/ops.def"
#undef FUSEJIT_UNARY
#undef FUSEJIT_BINARY
#undef FUSEJIT_SPECIAL
#undef FUSEJIT_REDUCE
#undef FUSEJIT_COMPOSITE
};

using UnaryReference = double (*)(double x, const Attrs& attrs);
using BinaryReference = double (*)(double a, double b);
using ReduceCombine = double (*)(double acc, double x);
// Builds the primitives of a composite into the operands' graph.
using CompositeExpansion = Value (*)(std::span<const Value> operands, const Attrs& attrs);

struct OpInfo {
  Op op;
  std::string_view name;
  OpKind kind;
  int min_operands;
  int max_operands;
  std::span<const AttrSpec> attrs;
  double flops;  // per output element (per input element for reductions); composites: their expansion's
  double gpu_instructions;  // SASS instructions per element on sm_90 (see ops.def); composites: their expansion's
  CostClass cost_class = CostClass::kSimple;
  UnaryReference unary = nullptr;
  BinaryReference binary = nullptr;
  double reduce_identity = 0;
  ReduceCombine reduce_combine = nullptr;
  bool reduce_divides_by_count = false;
  bool reduce_rounds = false;  // the combination rounds: its float32 result depends on the terms' order (ops.def)
  CompositeExpansion expand = nullptr;
  std::string_view code = {};                  // f32 expression in generated kernels (see ops.def)
  std::string_view reduce_identity_code = {};  // reductions: the accumulator's initial value

  bool is_elementwise() const {
    return kind == OpKind::kUnary || kind == OpKind::kBinary || kind == OpKind::kCast || kind == OpKind::kDropout;
  }
  const AttrSpec* find_attr(std::string_view attr_name) const;
};

// Whether `op` is a value of the enum (a Node built by hand may hold any).
bool is_valid_op(Op op);
// Throws fusejit::Error for an op that is not valid.
const OpInfo& op_info(Op op);
// The op a user may call by this name; nullptr when there is none.
const OpInfo* find_op(std::string_view name);
// Every op a user may call, in table order.
std::span<const OpInfo> callable_ops();

// Scalar semantics shared by the op table rows (PyTorch's NaN rules).
namespace reference {
double relu(double x);
double maximum(double a, double b);
double minimum(double a, double b);
double gelu(double x, std::string_view approximate);
}  // namespace reference

}  // namespace fusejit

template <>
struct fmt::formatter<fusejit::Op> : fmt::formatter<std::string_view> {
  auto format(fusejit::Op op, format_context& ctx) const {
    return fmt::formatter<std::string_view>::format(fusejit::op_info(op).name, ctx);
  }
};
