// The expression emitter shared by every code-generation target. Each op's
// f32 expression comes from the op table (ops.def, last column); this file
// only substitutes operands and attributes into it. The fj_* functions the
// expressions call are defined once per target.
#pragma once

#include <span>
#include <string>
#include <string_view>

#include "ir/graph.h"

namespace fusejit {

// A float constant as C++/CUDA source: the value rounded to f32, printed so
// that it reads back exactly ("0.1f", "2.0f", "1e-05f").
std::string float_literal(double value);

// The expression computing node `id` of `graph` from its operands'
// expressions. Literal operands are printed with float_literal(); `index`
// is the global element index (used by dropout).
std::string node_expression(const Graph& graph, int32_t id, std::span<const std::string> operands,
                            std::string_view index);

// For dropout over `width` (8 or 4) consecutive elements whose first index
// is a multiple of `width`: one call that draws one Philox block for them
// ("fj_dropout8(in, out, index, ...)"; `in` and `out` point at `width`
// floats). A block decides 8 elements (ir/philox.h), so width 4 uses half.
std::string dropout_vector_call(const Node& node, int width, std::string_view in, std::string_view out,
                                std::string_view index);
// The same for 8 elements of dropout(gelu(x)) where the GeLU folds into the
// dropout (fusion/gelu_dropout.h): "fj_gelu_dropout8(in, out, index, ...)",
// `in` pointing at the GeLU's operand.
std::string gelu_dropout_vector_call(const Node& dropout, std::string_view in, std::string_view out,
                                     std::string_view index);
// The widest such call for vectors of `vec` elements: 8 or 4, or 0 when
// `vec` is not a multiple of 4 (the caller then drops element by element).
int dropout_vector_width(int vec);

// For dropout over `count` consecutive elements starting at any index (the
// CPU target): "fj_dropout_span(in, out, count, first_index, ...)".
std::string dropout_span_call(const Node& node, std::string_view in, std::string_view out, std::string_view count,
                              std::string_view first_index);

// For a reduction: the accumulator's initial value, and the expression that
// combines accumulator `acc` with element `x`.
std::string reduce_identity(const Node& node);
std::string reduce_combine(const Node& node, std::string_view acc, std::string_view x);

// The C identifier a kernel uses for a storage dtype ("float", "fj_bf16").
std::string_view storage_type(DType dtype);

}  // namespace fusejit
