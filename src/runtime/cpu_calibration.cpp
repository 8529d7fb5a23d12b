#include "runtime/cpu_calibration.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <optional>
#include <vector>

#include <absl/strings/str_join.h>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "codegen/cpu/cpu_emitter.h"
#include "cost/cost_model.h"
#include "cost/machine_load.h"
#include "fusejit_version.h"
#include "fusion/cpu_work_split.h"
#include "fusion/plan.h"
#include "ir/error.h"
#include "ir/messages.h"
#include "ir/text_format.h"
#include "runtime/backend.h"
#include "runtime/file_io.h"
#include "runtime/host_compiler.h"
#include "runtime/sha256.h"
#include "runtime/statistics.h"
#include "runtime/thread_pool.h"

namespace fusejit {
namespace {

// One probe per cost class: a graph of ops of that class computing y from
// x. Simple ops are a chain of 16, so that arithmetic, not the load and
// store of each element, is what the probe times (as in a fused kernel).
// Costlier ops are one per element: a chain of long ops is one dependent
// chain per element, which the out-of-order window overlaps poorly (four
// GeLUs in a row ran at half the rate of one). Dropout and the 16-bit GeLU
// are bf16, with their conversions' price taken out: a single f32 dropout,
// with 8 bytes moved per element, measured the Philox class 1.4-1.7x below
// what a bf16 dropout kernel reaches.
struct Probe {
  CostClass cost_class;
  const char* statements;
  // Where the probe is not an op chain on x: the whole graph, {} standing
  // for its rows (rows_per_thread per thread).
  const char* graph = nullptr;
  // The dtype of x and of every value of the chain.
  const char* dtype = "f32";
  // Whether the time of its 16-bit conversions, as the cost model prices
  // them (the simple class's rate), is taken out of the probe's, since the
  // model adds it back to every kernel that converts.
  bool conversions_apart = false;
  // A graph probe's rows per thread: one block of the CPU GEMM's rows.
  int64_t rows_per_thread = kCpuMatmulRowBlock;
};

// The GEMM probe: B [1024, 1024], as a transformer layer's weights are;
// and the same in bf16, which runs another path where the CPU has
// AVX512-BF16 (codegen/cpu/matmul.cpp).
constexpr const char* kGemmProbe = "input x: f32[{}, 1024]\ninput w: f32[1024, 1024]\ny = matmul(x, w)\noutput y\n";
constexpr const char* kBf16GemmProbe =
    "input x: bf16[{}, 1024]\ninput w: bf16[1024, 1024]\ny = matmul(x, w)\noutput y\n";

constexpr Probe kProbes[] = {
    {CostClass::kSimple,
     "a = mul(x, 0.999)\nb = add(a, 0.001)\nc = mul(b, 0.999)\nd = add(c, 0.001)\ne = mul(d, 0.999)\n"
     "f = add(e, 0.001)\ng = mul(f, 0.999)\nh = add(g, 0.001)\ni = mul(h, 0.999)\nj = add(i, 0.001)\n"
     "k = mul(j, 0.999)\nl = add(k, 0.001)\nm = mul(l, 0.999)\nn = add(m, 0.001)\no = mul(n, 0.999)\n"
     "y = add(o, 0.001)"},
    {CostClass::kDivSqrt, "y = rsqrt(x)"},
    {CostClass::kExpLog, "y = exp(x)"},
    {CostClass::kErf, "y = erf(x)"},
    // A GeLU from which only 16-bit values are computed has a helper of its
    // own (Graph::cost_class), so the probe is bf16. It used to be a chain
    // of 4 GeLUs, so that the conversions weighed little, but that ran at
    // half the rate of one GeLU per element (3.54 ns per element against
    // 4 x 0.43 on one Xeon thread), likely because each element's four
    // GeLUs are one dependent chain of about 140 instructions, of which the
    // out-of-order window holds few. The model predicted the demo's unfused
    // GeLU kernel at 10.4 ms where it ran in 5.6-6.0
    // (bench/results/2026-12-02-cpu-prefetch-ahead.md).
    {CostClass::kGelu16Bit, "y = gelu(x)", nullptr, "bf16", /*conversions_apart=*/true},
    {CostClass::kPow, "y = pow(x, 1.7)"},
    {CostClass::kPhilox, "y = dropout(x, p=0.1, seed=42)", nullptr, "bf16", /*conversions_apart=*/true},
    // The generated GEMM as it runs (packing, micro-kernel, blocks of C),
    // not the FMA units' peak: it reached about half of that on two Xeon
    // cores, and the model predicted matmuls at twice their speed. One row
    // block per thread, about a 256-token batch on two cores.
    // Its packing is priced at the f32 GEMM's rate (gemm_figures): one
    // probe, not two, for a path only bf16 matmuls take.
    {CostClass::kMatmulBf16, nullptr, kBf16GemmProbe},
    {CostClass::kMatmul, nullptr, kGemmProbe},
};

// The same GEMM on fewer rows per thread: each thread still packs all of
// B once, so the two times set the packing apart from the multiply-adds
// (gemm_figures). A 16-row GEMM on one thread took twice the time the
// model predicted from the one-block probe alone
// (bench/results/2026-12-06-cpu-matmul-packing.md). 36 rows: a whole
// number of the micro-kernel's 6-row slivers, and enough for the work
// split to give every thread a share.
constexpr Probe kShortGemmProbe{CostClass::kMatmul, nullptr, kGemmProbe, "f32", false, 36};

// Every probe timed: one per class, then the shorter GEMM.
std::vector<Probe> all_probes() {
  std::vector<Probe> probes(std::begin(kProbes), std::end(kProbes));
  probes.push_back(kShortGemmProbe);
  return probes;
}

// Elements per thread: 8 MiB of f32 input and output per thread (4 MiB in
// bf16), within a server L3 with two threads, and a millisecond or more of
// work per run, so that waking the pool's threads (tens of microseconds)
// does not count.
constexpr int64_t kElementsPerThread = 1 << 20;
constexpr std::chrono::milliseconds kProbeWarmup{300};
// Part of the cache key: raised when the way the probes measure changes, so
// that figures measured the old way are measured again (2: warm-up by time,
// after cold-cache figures were found up to 2x low; 3: the 16-bit GeLU and
// dropout probed one op per element, bf16, their conversions taken out; 4:
// each class the fastest of three rounds, conversions taken out at each
// round's simple rate; 5: kRounds rounds, conversions taken out once from
// the fastest times, at the final simple rate; 6: the share of the machine
// other programs took while the probes ran is kept, and a busy
// calibration measured again once the machine is idle; 7: the GEMM probed
// at two row counts, B's packing set apart from the multiply-adds; 8: a
// bf16 GEMM probed for the matmul_bf16 class).
constexpr int kProbeMethod = 8;
// Rounds over all the probes; each probe's fastest counts
// (calibrated_cpu_device says why).
constexpr int kRounds = 3;

absl::StatusOr<Graph> probe_graph(const Probe& probe) {
  if (probe.graph != nullptr) {
    return parse_graph(fmt::format(fmt::runtime(probe.graph), probe.rows_per_thread * ThreadPool::global().size()));
  }
  return parse_graph(fmt::format("input x: {}[{}, {}]\n{}\noutput y\n", probe.dtype, ThreadPool::global().size(),
                                 kElementsPerThread, probe.statements));
}

// A probe's kernel timed: the median time of its runs, and what the cost
// model counts in it (the op table's FLOPs, 2 M N K for a matmul, its
// 16-bit conversions, and the elements of B a GEMM packs, all threads).
struct ProbeTime {
  double seconds = 0;
  double flops = 0;
  double conversion_ops = 0;
  double packed_elements = 0;
};

// `warmup`: how long to run it before timing (the first round's probes
// follow their compilation; later rounds' do not). `load` measures what
// other programs took while it ran (not while it compiled: the compiler is
// one of them).
absl::StatusOr<ProbeTime> time_probe(Backend& backend, const Probe& probe, std::chrono::milliseconds warmup,
                                     MachineLoadMeter& load) {
  absl::StatusOr<Graph> g = probe_graph(probe);
  if (!g.ok()) return g.status();
  const FusionPlan plan = make_fused_plan(*g);
  absl::StatusOr<std::unique_ptr<LoadedPlan>> loaded = backend.load(plan);
  if (!loaded.ok()) return loaded.status();
  if (absl::Status s = (*loaded)->set_inputs(random_inputs(*g, 1)); !s.ok()) return s;
  load.start();
  // Warm up for a while, not a number of runs: right after the probe's
  // module is compiled (a cold cache), the machine is still busy with what
  // the compiler left behind, and the first tens of milliseconds ran up to
  // 2x slow on the development VM, which halved a class's figure.
  const auto warm_until = std::chrono::steady_clock::now() + warmup;
  for (int rep = 0; rep < 3 || std::chrono::steady_clock::now() < warm_until; ++rep) {
    if (absl::Status s = (*loaded)->time_kernel(0).status(); !s.ok()) return s;
  }
  std::vector<double> us;
  for (int rep = 0; rep < 7; ++rep) {
    absl::StatusOr<double> t = (*loaded)->time_kernel(0);
    if (!t.ok()) return t.status();
    us.push_back(*t);
  }
  load.stop();
  const KernelCost cost = estimate_kernel(plan, plan.kernels.at(0), cpu_identity());
  const auto packed =
      static_cast<double>(cpu_matmul_packed_elements(*plan.graph, plan.kernels.at(0), ThreadPool::global().size()));
  return ProbeTime{median(us) * 1e-6, cost.flops, cost.conversion_ops, packed};
}

// The class throughput a probe's time gives, in the model's units.
// `simple_tflops`, the simple class's rate, prices the conversions that a
// probe with conversions_apart has taken out (the model adds them back to
// every kernel that converts, at that rate).
double tflops_from_time(const Probe& probe, const ProbeTime& t, double simple_tflops) {
  double seconds = t.seconds;
  if (probe.conversions_apart && simple_tflops > 0) {
    // At least half the time stays: a kernel faster than its conversions'
    // price says the price is high, not that the op is free.
    seconds = std::max(seconds - t.conversion_ops / (simple_tflops * 1e12), 0.5 * seconds);
  }
  return t.flops / seconds / 1e12;
}

// cpu_calibration_key() for the CPU as cpu_device() describes it.
std::string calibration_key(const DeviceSpec& cpu) {
  // The probes' generated source, helpers included, and the compile flags:
  // a change to the CPU math, the kernel templates or the flags changes the
  // throughput measured, so a cached calibration of other kernels must not
  // be used.
  std::string sources;
  for (const Probe& p : all_probes()) {
    absl::StatusOr<Graph> g = probe_graph(p);
    if (!g.ok()) return "";  // the probes are constants: cannot happen
    for (const CpuKernelSource& k : emit_cpu(make_fused_plan(*g))) sources += k.source;
  }
  absl::StatusOr<HostCompiler> compiler = find_host_compiler();
  return fmt::format("fusejit {} | {} {} | {} threads | {} | probes v{} | kernels sha256 {}", FUSEJIT_VERSION,
                     compiler.ok() ? compiler->identity : "?", absl::StrJoin(host_compile_flags(), " "),
                     ThreadPool::global().size(), cpu.description, kProbeMethod, sha256_hex(sources));
}

// The CPU as the pool's threads see it: they run the kernels and the
// probes, and FUSEJIT_THREADS may give fewer than the CPUs whose copy
// measured the bandwidth; fewer threads share less of it.
DeviceSpec with_pool_threads(DeviceSpec d) {
  const int pool = ThreadPool::global().size();
  if (pool < d.compute_units) {
    const double each = std::max(d.thread_bandwidth_gbps, d.bandwidth_gbps / d.compute_units);
    d.bandwidth_gbps = std::min(d.bandwidth_gbps, pool * each);
  }
  d.compute_units = pool;
  return d;
}

// No kernel outruns the FMA units: where the generated GEMM measured
// faster than the FMA probe (the two are measured at different moments,
// and `devices` once showed fp32 0.118 TFLOP/s beside a matmul class of
// 0.177 on a busy machine), the peak is at least the GEMM's rate.
// Likewise the "tensor" roof of 16-bit matmuls is at least the bf16 GEMM's
// rate, twice the FMA units' where the CPU multiplies bf16 pairs.
DeviceSpec with_peak_at_least_the_gemm(DeviceSpec d) {
  const double gemm = d.class_tflops[static_cast<int>(CostClass::kMatmul)];
  if (gemm > d.peak_f32_tflops) {
    d.peak_f32_tflops = gemm;
    d.peak_tensor_tflops = std::max(d.peak_tensor_tflops, gemm);
  }
  d.peak_tensor_tflops = std::max(d.peak_tensor_tflops, d.class_tflops[static_cast<int>(CostClass::kMatmulBf16)]);
  return d;
}

}  // namespace

std::string cpu_calibration_cache_path() {
  return (std::filesystem::path(cache_directory()) / "cpu-device-jit.json").string();
}

std::string cpu_calibration_key() { return calibration_key(cpu_device()); }

double measure_pool_launch_us() {
  ThreadPool& pool = ThreadPool::global();
  std::vector<double> us;
  for (int rep = 0; rep < 101; ++rep) {
    const auto start = std::chrono::steady_clock::now();
    pool.parallel_for(pool.size(), 1, [](int64_t, int64_t) {});
    us.push_back(std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start).count());
  }
  return median(us);
}

GemmFigures gemm_figures(double seconds, double flops, double fewer_rows_seconds, double fewer_rows_flops,
                         double packed_elements) {
  const GemmFigures together{flops / seconds / 1e12, 0};
  const double extra_flops = flops - fewer_rows_flops;
  const double extra_seconds = seconds - fewer_rows_seconds;
  if (extra_flops <= 0 || extra_seconds <= 0 || packed_elements <= 0) return together;
  const double seconds_per_flop = extra_seconds / extra_flops;
  const double pack_seconds = seconds - flops * seconds_per_flop;
  if (pack_seconds < 0.02 * seconds) return together;
  return GemmFigures{1 / seconds_per_flop / 1e12, packed_elements / pack_seconds / 1e9};
}

absl::StatusOr<DeviceSpec> calibrated_cpu_device(Backend& backend) {
  // One calibration at a time in a process. Three CPU backends made on
  // three threads calibrated together, timed each other's probes (and
  // counted them as other programs' load) and came out 2x apart (an FP32
  // peak of 0.088, 0.099 and 0.197 TFLOP/s); one after another, the later
  // ones read what the first one cached.
  static std::mutex one_at_a_time;
  std::lock_guard<std::mutex> lock(one_at_a_time);
  DeviceSpec d = with_pool_threads(cpu_device());
  // How busy the machine was when cpu-device.json was measured; the
  // calibration's own share is kept in its entry, and the device shows
  // the busier of the two.
  const double copy_busy_share = d.others_busy_share;
  const int copy_busy_remeasures = d.busy_remeasures;
  auto with_busier_share = [&](DeviceSpec spec) {
    if (copy_busy_share > spec.others_busy_share) {
      spec.others_busy_share = copy_busy_share;
      spec.busy_remeasures = copy_busy_remeasures;
    }
    return spec;
  };
  const std::filesystem::path path = cpu_calibration_cache_path();
  const std::string key = calibration_key(d);
  std::string why = "once for this compiler, thread count and kernel source";
  // The file keeps one entry per key (compiler, thread count, kernel
  // source), so that switching between settings does not measure again.
  nlohmann::json entries = nlohmann::json::object();
  // The cached figures, where they were measured on a busy machine and
  // are measured again now that it is idle.
  std::optional<DeviceSpec> busy;
  if (is_small_regular_file(path.string(), kDeviceCacheFileMaxBytes)) {
    std::ifstream in(path);
    const nlohmann::json j = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
    if (!j.is_discarded() && j.is_object() && j.contains("entries") && j["entries"].is_object()) entries = j["entries"];
    if (entries.contains(key)) {
      try {
        const nlohmann::json& entry = entries.at(key);
        DeviceSpec cached = d;
        for (const Probe& p : kProbes) {
          cached.class_tflops[static_cast<int>(p.cost_class)] =
              entry.at("class_tflops").at(std::string(cost_class_name(p.cost_class))).get<double>();
        }
        cached.matmul_pack_gelems = entry.at("matmul_pack_gelems").get<double>();
        cached.launch_overhead_us = entry.at("launch_overhead_us").get<double>();
        read_busy_fields(entry, cached.others_busy_share, cached.busy_remeasures);
        cached.description += "; op throughput of JIT kernels";
        if (plausible_measured_figures(cached)) {
          static std::atomic<bool> measured_here{false};
          if (!measure_busy_figures_again(cached.others_busy_share, cached.busy_remeasures, measured_here)) {
            return with_peak_at_least_the_gemm(with_busier_share(cached));
          }
          why = busy_figures_reason(cached.others_busy_share);
          busy = cached;
        }
      } catch (const nlohmann::json::exception&) {
        // Another shape: measure again and replace it.
      }
      // Figures no machine has (edited or damaged): measured again below.
    }
  }
  // A few seconds of silence would look like a hang.
  note(fmt::format("measuring this CPU's op throughput with JIT kernels for the cost model ({}; the figures go to {})",
                   why, path.string()));
  // Each probe runs in kRounds rounds over all of them, and its fastest
  // round counts: on a shared VM a class measured once came out 1.6x low
  // in one calibration of five (Philox 0.037 against 0.060 TFLOP/s), and a
  // neighbour's burst only ever slows a probe down. The conversions' price
  // is taken out of the fastest times at the simple class's final rate,
  // the one the model adds back.
  const std::vector<Probe> probes = all_probes();
  std::vector<ProbeTime> fastest(probes.size());
  MachineLoadMeter load;
  for (int round = 0; round < kRounds; ++round) {
    for (size_t i = 0; i < probes.size(); ++i) {
      absl::StatusOr<ProbeTime> t =
          time_probe(backend, probes[i], round == 0 ? kProbeWarmup : std::chrono::milliseconds(0), load);
      if (!t.ok()) return t.status();
      if (round == 0 || t->seconds < fastest[i].seconds) fastest[i] = *t;
    }
  }
  static_assert(kProbes[0].cost_class == CostClass::kSimple && !kProbes[0].conversions_apart,
                "the simple class, which prices the conversions, is probe 0 and has none taken out");
  const double simple_tflops = tflops_from_time(kProbes[0], fastest[0], /*simple_tflops=*/0);
  for (size_t i = 0; i < std::size(kProbes); ++i) {
    d.class_tflops[static_cast<int>(kProbes[i].cost_class)] = tflops_from_time(kProbes[i], fastest[i], simple_tflops);
  }
  static_assert(kProbes[std::size(kProbes) - 1].cost_class == CostClass::kMatmul,
                "the one-block GEMM probe is the last of kProbes, the shorter one after it");
  const ProbeTime& one_block = fastest[std::size(kProbes) - 1];
  const GemmFigures gemm = gemm_figures(one_block.seconds, one_block.flops, fastest.back().seconds,
                                        fastest.back().flops, one_block.packed_elements);
  d.class_tflops[static_cast<int>(CostClass::kMatmul)] = gemm.tflops;
  d.matmul_pack_gelems = gemm.pack_gelems;
  // The bf16 GEMM's multiply-adds: its time less its packing at the f32
  // GEMM's packing rate (the model adds that back to every GEMM), at least
  // half its time staying, as with conversions.
  static_assert(kProbes[std::size(kProbes) - 2].cost_class == CostClass::kMatmulBf16,
                "the bf16 GEMM probe comes just before the f32 one");
  const ProbeTime& bf16 = fastest[std::size(kProbes) - 2];
  double bf16_seconds = bf16.seconds;
  if (gemm.pack_gelems > 0) {
    bf16_seconds = std::max(bf16_seconds - bf16.packed_elements / (gemm.pack_gelems * 1e9), 0.5 * bf16_seconds);
  }
  d.class_tflops[static_cast<int>(CostClass::kMatmulBf16)] = bf16.flops / bf16_seconds / 1e12;
  d.launch_overhead_us = measure_pool_launch_us();
  d.others_busy_share = load.others_share();
  d.busy_remeasures = 0;  // the count is this file's, not cpu-device.json's (better_measured_figures counts)
  d.description += "; op throughput of JIT kernels";
  if (d.others_busy_share > kBusyShare) {
    warn(busy_measurement_warning("this CPU's op throughput", d.others_busy_share));
  }
  if (busy) d = better_measured_figures(*busy, d);
  nlohmann::json classes;
  for (const Probe& p : kProbes) {
    classes[std::string(cost_class_name(p.cost_class))] = d.class_tflops[static_cast<int>(p.cost_class)];
  }
  // An unwritable directory only costs the caching (replace_file writes
  // temp-then-rename, so a concurrent reader never sees half a file).
  nlohmann::json entry{{"class_tflops", classes},
                       {"matmul_pack_gelems", d.matmul_pack_gelems},
                       {"launch_overhead_us", d.launch_overhead_us}};
  write_busy_fields(entry, d.others_busy_share, d.busy_remeasures);
  entries[key] = entry;
  const nlohmann::json cached{{"entries", entries}};
  absl::Status saved = ensure_directory(path.parent_path().string());
  if (saved.ok()) saved = replace_cache_file(path.string(), cached.dump(2) + "\n");
  if (!saved.ok()) {
    warn(fmt::format("cannot keep the CPU's op throughputs ({}); the next process measures them again",
                     status_text(saved)));
  }
  return with_peak_at_least_the_gemm(with_busier_share(d));
}

}  // namespace fusejit
