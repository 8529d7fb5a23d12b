#include "ir/op_table.h"

#include <cmath>
#include <limits>
#include <numbers>

#include <fmt/format.h>

#include "ir/composites.h"
#include "ir/error.h"

namespace fusejit {

namespace reference {

double relu(double x) { return std::isnan(x) ? x : (x > 0 ? x : 0.0); }

double maximum(double a, double b) {
  if (std::isnan(a) || std::isnan(b)) return std::numeric_limits<double>::quiet_NaN();
  return a > b ? a : b;
}

double minimum(double a, double b) {
  if (std::isnan(a) || std::isnan(b)) return std::numeric_limits<double>::quiet_NaN();
  return a < b ? a : b;
}

// The definitions, 0.5 x (1 + erf(x / sqrt 2)) and 0.5 x (1 + tanh(z)),
// written without their cancellation for x < 0: 1 + erf(y) = erfc(-y), and
// 0.5 (1 + tanh(z)) = 1 / (1 + exp(-2z)). In the written forms 1 + erf is 0
// in double below x = -8.37 (and 1 + tanh below -7.2), where the function
// is about -4e-16 and still a normal bf16 number, and the kernels' values
// there looked 9,000 bf16 ulps wrong. Special values are the formulas':
// gelu(+inf) = +inf, gelu(-inf) = NaN (-inf * 0), gelu(-0) = -0.
double gelu(double x, std::string_view approximate) {
  if (approximate == "tanh") {
    const double z = std::sqrt(2.0 / std::numbers::pi) * (x + 0.044715 * x * x * x);
    return x / (1.0 + std::exp(-2.0 * z));
  }
  return 0.5 * x * std::erfc(-x / std::numbers::sqrt2);
}

}  // namespace reference

namespace {

constexpr std::span<const AttrSpec> kNoAttrs{};
constexpr AttrSpec kGeluAttrs[] = {{"approximate", AttrType::kEnum, "none", "none|tanh"}};
constexpr AttrSpec kCastAttrs[] = {{"dtype", AttrType::kDType, ""}};
constexpr AttrSpec kDropoutAttrs[] = {
    {"p", AttrType::kFloat, "", {}, 0.0, 1.0, true, false, "in [0, 1)", /*float32_constant=*/false},
    {"seed", AttrType::kInt, "0", {}, 0.0, 9.2233720368547758e18, true, true, "a non-negative integer"},
};
// The norms' eps, with its default.
constexpr AttrSpec eps_attr(const char* default_value) {
  return {"eps", AttrType::kFloat,     default_value, {}, 0.0, std::numeric_limits<double>::infinity(), false,
          false, "a finite number > 0"};
}
constexpr AttrSpec kLayerNormAttrs[] = {eps_attr("1e-05")};
constexpr AttrSpec kRmsNormAttrs[] = {eps_attr("1e-06")};

// Each row names the fields it sets; the rest keep OpInfo's defaults.
// clang-format off
constexpr OpInfo kOpTable[] = {
    {.op = Op::kInput, .name = "input", .kind = OpKind::kInput, .min_operands = 0, .max_operands = 0, .attrs = {},
     .flops = 0, .gpu_instructions = 0},
#define FUSEJIT_UNARY(Enum, name_, flops_, gpu, cls, attrs_, expr, code_)                                           \
  {.op = Op::k##Enum, .name = name_, .kind = OpKind::kUnary, .min_operands = 1, .max_operands = 1,                 \
   .attrs = std::span<const AttrSpec>(attrs_), .flops = flops_, .gpu_instructions = gpu,                            \
   .cost_class = CostClass::cls,                                                                                    \
   .unary = [](double x, const Attrs& attrs) -> double {                                                            \
     (void)attrs;                                                                                                   \
     return expr;                                                                                                   \
   },                                                                                                               \
   .code = code_},
#define FUSEJIT_BINARY(Enum, name_, flops_, gpu, cls, expr, code_)                                                  \
  {.op = Op::k##Enum, .name = name_, .kind = OpKind::kBinary, .min_operands = 2, .max_operands = 2, .attrs = {},   \
   .flops = flops_, .gpu_instructions = gpu, .cost_class = CostClass::cls,                                          \
   .binary = [](double a, double b) -> double { return expr; }, .code = code_},
#define FUSEJIT_SPECIAL(Enum, name_, kind_, min_args, max_args, attrs_, flops_, gpu, cls, code_)                    \
  {.op = Op::k##Enum, .name = name_, .kind = OpKind::kind_, .min_operands = min_args, .max_operands = max_args,    \
   .attrs = std::span<const AttrSpec>(attrs_), .flops = flops_, .gpu_instructions = gpu,                            \
   .cost_class = CostClass::cls, .code = code_},
#define FUSEJIT_REDUCE(Enum, name_, flops_, gpu, cls, identity, combine, divide, rounds, identity_code, combine_code) \
  {.op = Op::k##Enum, .name = name_, .kind = OpKind::kReduce, .min_operands = 1, .max_operands = 1, .attrs = {},   \
   .flops = flops_, .gpu_instructions = gpu, .cost_class = CostClass::cls, .reduce_identity = identity,             \
   .reduce_combine = [](double acc, double x) -> double { return combine; }, .reduce_divides_by_count = divide,     \
   .reduce_rounds = rounds, .code = combine_code, .reduce_identity_code = identity_code},
#define FUSEJIT_COMPOSITE(Enum, name_, min_args, max_args, attrs_, expansion)                                       \
  {.op = Op::k##Enum, .name = name_, .kind = OpKind::kComposite, .min_operands = min_args,                          \
   .max_operands = max_args, .attrs = std::span<const AttrSpec>(attrs_), .flops = 0, .gpu_instructions = 0,         \
   .expand = expansion},
#include "ir/ops.def"
#undef FUSEJIT_UNARY
#undef FUSEJIT_BINARY
#undef FUSEJIT_SPECIAL
#undef FUSEJIT_REDUCE
#undef FUSEJIT_COMPOSITE
};
// clang-format on

// The table is indexed by Op: row i must describe Op(i).
constexpr bool table_matches_enum() {
  for (size_t i = 0; i < std::size(kOpTable); ++i) {
    if (static_cast<size_t>(kOpTable[i].op) != i) return false;
  }
  return true;
}
static_assert(table_matches_enum(), "ops.def rows and the Op enum disagree");

}  // namespace

std::string_view cost_class_name(CostClass c) {
  switch (c) {
    case CostClass::kSimple: return "simple";
    case CostClass::kDivSqrt: return "div_sqrt";
    case CostClass::kExpLog: return "exp_log";
    case CostClass::kErf: return "erf";
    case CostClass::kGelu16Bit: return "gelu_16bit";
    case CostClass::kPow: return "pow";
    case CostClass::kPhilox: return "philox";
    case CostClass::kMatmul: return "matmul";
    case CostClass::kMatmulBf16: return "matmul_bf16";
  }
  return "?";
}

const AttrSpec* OpInfo::find_attr(std::string_view attr_name) const {
  for (const AttrSpec& spec : attrs) {
    if (spec.name == attr_name) return &spec;
  }
  return nullptr;
}

bool is_valid_op(Op op) { return static_cast<size_t>(op) < std::size(kOpTable); }

const OpInfo& op_info(Op op) {
  // A Node made through Graph::append can hold any value; reading past the
  // table would give garbage or a crash instead of verify()'s message.
  if (!is_valid_op(op)) throw Error(fmt::format("op {} is not an op of the op table", static_cast<int>(op)));
  return kOpTable[static_cast<size_t>(op)];
}

const OpInfo* find_op(std::string_view name) {
  for (const OpInfo& info : callable_ops()) {
    if (info.name == name) return &info;
  }
  return nullptr;
}

std::span<const OpInfo> callable_ops() { return std::span<const OpInfo>(kOpTable).subspan(1); }

}  // namespace fusejit
