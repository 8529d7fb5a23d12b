// What ptxas says about a compiled kernel (`--ptxas-options=-v`): registers,
// spills, shared memory and stack per function. Spills are what silently cut
// a memory-bound kernel's bandwidth, so they are kept with every kernel.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace fusejit {

struct PtxasFunction {
  std::string name;
  bool entry = false;  // a __global__ kernel, rather than a device function ptxas kept out of line
  int registers = -1;  // -1: not reported (device functions)
  int64_t spill_store_bytes = 0;
  int64_t spill_load_bytes = 0;
  int64_t shared_bytes = 0;
  int64_t stack_bytes = 0;
};

struct PtxasReport {
  // Over all functions: the most registers, shared memory and stack of any
  // one, and the sum of spills. registers is -1 when ptxas did not run (a
  // PTX-only compile for compute_XX).
  int registers = -1;
  int64_t spill_store_bytes = 0;
  int64_t spill_load_bytes = 0;
  int64_t shared_bytes = 0;
  int64_t stack_bytes = 0;
  std::vector<PtxasFunction> functions;
  std::string log;  // ptxas's own lines, verbatim

  // The bytes a thread spills, as ptxas's "N bytes spill stores" says and
  // as nvcc and Triton report spills; each spilled byte is loaded back at
  // least once (spill_load_bytes), which is not counted again.
  int64_t spill_bytes() const { return spill_store_bytes; }
};

// Reads the "ptxas info" lines out of an NVRTC log; other lines are ignored.
PtxasReport parse_ptxas_log(std::string_view log);

}  // namespace fusejit
