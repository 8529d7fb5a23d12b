// A matmul kernel's epilogue: the elementwise ops after the product that run
// inside the GEMM, as cuBLASLt runs them (CUBLASLT_EPILOGUE_BIAS, _RELU,
// _GELU and their _BIAS forms) and as the CPU's generated GEMM applies them
// to each block of C before storing it. In order, each optional, at least
// one:
//   1. an add of a vector of the result's last extent N (shape [N], [1, N],
//      ...) broadcast over the rows: a linear layer's bias;
//   2. relu, or gelu with approximate=tanh (cuBLASLt's GELU is the tanh
//      form) in bf16 and f16: in f32 the GeLU stays a kernel of its own, as
//      cuBLASLt's may compute tanh less exactly than f32's tolerance asks.
// Each step takes the value before it as its one use, so the product (and
// the biased value, when an activation follows) never reaches memory: a
// transformer MLP's bias-GeLU between its matmuls costs no HBM traffic.
// Everything is in the matmul's dtype, and the operands are too (a
// mixed-dtype matmul widens its operands first, and cuBLASLt takes one type).
#pragma once

#include <cstdint>
#include <span>
#include <string>

#include "fusion/plan.h"

namespace fusejit {

enum class MatmulActivation : uint8_t { kNone, kRelu, kGeluTanh };

struct MatmulEpilogue {
  int32_t bias_add = -1;  // the add node, -1: none
  int32_t bias = -1;      // the vector it adds
  int32_t activation_node = -1;
  MatmulActivation activation = MatmulActivation::kNone;

  bool empty() const { return bias_add < 0 && activation_node < 0; }
};

// The epilogue of matmul kernel `kernel` (its nodes after the matmul);
// empty for a kernel without one, and for other kernels.
MatmulEpilogue matmul_epilogue(const Graph& graph, const Kernel& kernel);

// "bias b1, gelu(approximate=tanh)": the epilogue in words ("" when empty).
std::string describe_epilogue(const Graph& graph, const MatmulEpilogue& epilogue);

// Why node `id` cannot be the next step of the epilogue of a matmul kernel
// holding `kernel_nodes` (the matmul first, then the steps so far); "" when
// it can. `last_used_elsewhere`: whether the kernel's last node has a use
// besides `id`, or is a graph output (then it must be stored, and the
// epilogue ends with it). The fusion pass places nodes by it;
// fusion_boundaries explains with it.
std::string matmul_epilogue_refusal(const Graph& graph, std::span<const int32_t> kernel_nodes, int32_t id,
                                    bool last_used_elsewhere);

}  // namespace fusejit
