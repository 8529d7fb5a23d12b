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

  // The bytes a thread's code spills: ptxas's "N bytes spill stores", a
  // static count of the spill store instructions' bytes (its "spill loads"
  // count the loads that bring them back, a different number; both are in
  // the log). What `fusejit emit` prints as spill bytes.
  int64_t spill_bytes() const { return spill_store_bytes; }
  bool has_spills() const { return spill_store_bytes > 0 || spill_load_bytes > 0; }
};

// Reads the "ptxas info" lines out of an NVRTC log; other lines are ignored.
PtxasReport parse_ptxas_log(std::string_view log);

}  // namespace fusejit
