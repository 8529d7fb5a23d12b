#include "support/graph_variants.h"

#include <set>
#include <stdexcept>

#include <fmt/format.h>

#include "ir/error.h"
#include "ir/infer.h"
#include "ir/text_format.h"

namespace fusejit::testing {

namespace {

// Rebuilds `graph` node by node after `edit_input` changed its inputs.
template <typename EditInput>
Graph rebuild(const Graph& graph, EditInput edit_input) {
  Graph out;
  out.set_source_file(graph.source_file());
  for (const Node& n : graph.nodes()) {
    if (n.op == Op::kInput) {
      Node copy = n;
      edit_input(copy);
      out.append(std::move(copy));
      continue;
    }
    NodeCheck check = make_node(out, n.info(), n.operands, n.attrs);
    if (!check.ok()) throw std::runtime_error("rebuilding a graph variant: " + check.error);
    check.node.name = n.name;
    out.append(std::move(check.node));
  }
  for (int32_t o : graph.outputs()) out.add_output(o);
  return out;
}

}  // namespace

Graph resize_extents(const Graph& graph, const std::map<int64_t, int64_t>& resize) {
  return rebuild(graph, [&](Node& input) {
    for (int d = 0; d < input.shape.rank(); ++d) {
      if (auto it = resize.find(input.shape[d]); it != resize.end()) input.shape[d] = it->second;
    }
  });
}

Graph with_input_dtype(const Graph& graph, DType dtype) {
  return rebuild(graph, [&](Node& input) { input.dtype = dtype; });
}

Graph parse_or_throw(std::string_view text, std::string_view name) {
  absl::StatusOr<Graph> g = parse_graph(text, name);
  if (!g.ok()) throw std::runtime_error(std::string(status_text(g.status())));
  return *std::move(g);
}

std::string stacked_layers_text(int layers) {
  std::string text = "input x: f32[48, 64]\n";
  for (int i = 0; i < layers; ++i) {
    text += fmt::format("input w{0}: f32[64, 64]\ninput b{0}: f32[64]\ninput g{0}: f32[64]\ninput be{0}: f32[64]\n", i);
  }
  std::string h = "x", outputs;
  for (int i = 0; i < layers; ++i) {
    text += fmt::format("m{0} = matmul({1}, w{0})\na{0} = add(m{0}, b{0})\nd{0} = dropout(a{0}, p=0.5, seed={2})\n"
                        "h{0} = layer_norm(d{0}, g{0}, be{0}, eps=1e-5)\n",
                        i, h, 1000 + 7 * i);
    outputs += fmt::format("d{}, ", i);
    h = fmt::format("h{}", i);
  }
  return text + "output " + outputs + h + "\n";
}

const std::vector<std::string>& varied_graph_texts() {
  static const std::vector<std::string> texts = {
      // diamond
      "input x: f32[33, 70]\ninput b: f32[70]\nh = add(x, b)\np = exp(h)\nq = tanh(h)\ny = mul(p, q)\noutput y\n",
      // one value used by two reductions, and an intermediate output
      "input x: bf16[9, 130]\nh = exp(x)\ns = sum(h)\nm = max(h)\ny = add(s, m)\noutput h, y\n",
      // broadcasts both ways
      "input c: f16[40, 1]\ninput r: f16[1, 50]\ninput x: f16[40, 50]\nt = add(c, r)\ny = mul(t, x)\noutput y\n",
      // matmul with an epilogue, mixed dtypes
      "input a: bf16[12, 40]\ninput w: f16[40, 24]\ninput b: bf16[24]\nm = matmul(a, w)\n"
      "h = add(m, b)\ny = gelu(h, approximate=tanh)\noutput y\n",
      // a kernel in between forbids the merge
      "input x: f32[16, 16]\ninput w: f32[16, 16]\na = exp(x)\nm = matmul(a, w)\ny = add(a, m)\noutput y\n",
      // siblings, several outputs, a cast
      "input x: f32[20, 31]\ne = exp(x)\nl = log(e)\nc = cast(l, dtype=bf16)\noutput e, c\n",
      // composites of every kind, rank 3
      "input x: bf16[3, 5, 64]\ninput g: bf16[64]\nr = rms_norm(x, g)\ns = softmax(r)\nl = log_softmax(x)\n"
      "y = add(s, l)\nn = layer_norm(y, g)\noutput n\n",
      // dropout before a reduction; a per-row input
      "input x: f32[8, 300]\ninput s: f32[8, 1]\nd = dropout(x, p=0.3, seed=7)\nt = mul(d, s)\ny = softmax(t)\n"
      "output y\n",
      // two LayerNorm layers in one row kernel: more [N] vectors than it keeps in registers
      // (gpu_row_vectors: b1, g1, g2_at, b2), so g2 and e2 are loaded in every row, g2 used twice;
      // g2_at is named like a reload's pointer would have been (r_g2_at), hiding the kept array
      "input x: f32[13, 800]\ninput b1: f32[800]\ninput g1: f32[800]\ninput g2_at: f32[800]\n"
      "input b2: f32[1, 800]\ninput g2: f32[800]\ninput e2: f32[800]\nh1 = add(x, b1)\na1 = gelu(h1)\n"
      "y1 = layer_norm(a1, g1, g2_at)\nh2 = add(y1, b2)\nd2 = dropout(h2, p=0.2, seed=3)\n"
      "y2 = layer_norm(d2, g2, e2)\nz = add(y2, g2)\nt = mul(z, g2_at)\noutput t\n",
      // the same in bf16 rows of 64, which share a warp (8 lanes each): reloads in rows some lanes
      // run past, and a GeLU folded into the dropout of it reading a reloaded vector's sum
      "input x: bf16[13, 64]\ninput b1: bf16[64]\ninput g1: bf16[64]\ninput e1: bf16[64]\n"
      "input b2: bf16[64]\ninput g2: bf16[64]\ninput e2: bf16[64]\ninput b3: bf16[64]\n"
      "y1 = layer_norm(x, g1, e1)\nh = mul(y1, b1)\nk = add(h, b2)\nr = add(k, b3)\na = gelu(r)\n"
      "d = dropout(a, p=0.1, seed=5)\ny = layer_norm(d, g2, e2)\noutput y\n",
      // every elementwise op, rank 4, an odd row length
      "input x: f16[2, 3, 5, 1001]\na = abs(x)\nc = add(a, 1)\nb = sqrt(c)\nd = rsqrt(c)\ne = reciprocal(c)\n"
      "f = log(c)\ng = exp(x)\nh = tanh(x)\ni = sigmoid(x)\nj = silu(x)\nk = relu(x)\nl = erf(x)\n"
      "m = neg(x)\nn = square(x)\no = gelu(x, approximate=tanh)\np = pow(c, 1.5)\nq = maximum(b, d)\n"
      "r = minimum(e, f)\ns = sub(g, h)\nt = div(i, c)\nu = mul(j, k)\nv = add(l, m)\nw = add(n, o)\n"
      "y1 = add(p, q)\ny2 = add(r, s)\ny3 = add(t, u)\ny4 = add(v, w)\ny5 = cast(y4, dtype=bf16)\n"
      "output y1, y2, y3, y5\n",
  };
  return texts;
}

Graph shrink(const Graph& graph, int64_t limit) {
  std::set<int64_t> extents;
  for (int32_t id : graph.inputs()) {
    for (int64_t e : graph.node(id).shape) {
      if (e > limit) extents.insert(e);
    }
  }
  static constexpr int64_t kSmall[] = {17, 19, 23, 29, 31, 37, 41, 43, 47, 53, 59, 61};
  std::map<int64_t, int64_t> resize;
  size_t i = 0;
  for (int64_t e : extents) resize[e] = kSmall[i++ % std::size(kSmall)];
  return resize_extents(graph, resize);
}

}  // namespace fusejit::testing
