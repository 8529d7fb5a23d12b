// What `fusejit bench` and `fusejit demo` print: tables per plan and kernel,
// the JSON object of `--json`, and where each kernel sits on the roofline.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "runtime/benchmark.h"

namespace fusejit {

// Header, correctness, a table per plan, speedups and bytes saved.
std::string format_bench(const BenchResult& result);
// Each kernel of both plans: intensity, achieved GFLOP/s, the roof at that
// intensity (min(peak, bandwidth x intensity), with the measured ceiling as
// the bandwidth) and the share of it reached.
std::string format_roofline(const BenchResult& result);
// { "backend", "device", "ceiling_gbps", "unfused": RUN, "fused": RUN,
//   "speedup_measured", "speedup_predicted", "bytes_saved", "max_rel_error", ... }
nlohmann::json bench_json(const BenchResult& result);

}  // namespace fusejit
