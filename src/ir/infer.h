// Checking one op application: operand count and kinds, attributes, and the
// result dtype and shape. The C++ builder, the text parser and the verifier
// all go through make_node(), so the three agree on every rule and message.
#pragma once

#include <span>
#include <string>

#include "ir/graph.h"

namespace fusejit {

struct NodeCheck {
  Node node;            // complete (type, shape, attributes with defaults) when ok()
  std::string error;    // "add(x: bf16[8, 4], w: bf16[3]): cannot broadcast [8, 4] with [3]"
  int operand = -1;     // index of the operand the error is about, if any
  std::string attr;     // name of the attribute the error is about, if any

  bool ok() const { return error.empty(); }
};

// Builds the node for `info` applied to `operands` (ids must be < graph size)
// with the attributes the user gave (`given`); missing attributes take their
// defaults. The node's name and location are left for the caller to set.
NodeCheck make_node(const Graph& graph, const OpInfo& info, std::span<const Operand> operands, const Attrs& given);

// The attribute checks of make_node() that need no operands, for a line of
// the text format whose operand could not be resolved: an unknown
// attribute, or a value out of range (messages as make_node's, without the
// operands). Empty when the attributes given are fine; error.attr names the
// attribute otherwise.
NodeCheck check_given_attrs(const OpInfo& info, const Attrs& given);

}  // namespace fusejit
