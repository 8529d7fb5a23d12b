// The CPU backend: every kernel of a plan generated as C++ (codegen/cpu),
// compiled by the host compiler into a shared object (host_compiler.h),
// and run on the process's thread pool over host buffers.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <map>
#include <mutex>
#include <optional>

#include <fmt/format.h>

#include "codegen/cpu/cpu_emitter.h"
#include "codegen/kernel_names.h"
#include "codegen/shared_code.h"
#include "cost/host_cpu.h"
#include "cost/streaming_copy.h"
#include "fusion/cpu_work_split.h"
#include "fusion/plan_verify.h"
#include "ir/counted.h"
#include "ir/cpu_count.h"
#include "ir/error.h"
#include "ir/messages.h"
#include "runtime/backend.h"
#include "runtime/cpu_calibration.h"
#include "runtime/host_buffer.h"
#include "runtime/host_compiler.h"
#include "runtime/tensor_storage.h"
#include "runtime/thread_pool.h"
#include "runtime/work_queue.h"
#include "runtime/worker_scratch.h"

namespace fusejit {
namespace {

double us_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start).count();
}

// A plan kernel ready to run: the compiled code it runs (its own, or one it
// shares with the same kernel of other layers) and its own arguments.
struct CpuKernel {
  std::string name;        // the plan's kernel name
  int64_t count = 0;       // work items (CpuKernelSource::count)
  int64_t grain = 1;
  int64_t scratch_floats = 0;  // working memory per call (CpuKernelSource::scratch_floats)
  std::shared_ptr<const HostModule> module;  // shared by the kernels compiled together
  HostModule::Entry entry = nullptr;
  double compile_ms = 0;  // its share of its module's compile; 0 when it runs another kernel's code
  std::string shares_code_with;  // the kernel whose compiled code it runs; "" for its own
  std::vector<uint64_t> seeds;   // its dropout seeds, pointed to by args
  std::vector<void*> args;       // one per parameter (emit::kernel_params)
};

class CpuLoadedPlan final : public LoadedPlan {
 public:
  static absl::StatusOr<std::unique_ptr<CpuLoadedPlan>> load(const FusionPlan& plan, const LoadOptions& options) {
    std::unique_ptr<CpuLoadedPlan> loaded(new CpuLoadedPlan(plan));
    if (absl::Status s = loaded->allocate(options); !s.ok()) return s;
    if (absl::Status s = loaded->compile(); !s.ok()) return s;
    return loaded;
  }

  const FusionPlan& plan() const override { return plan_; }
  const std::vector<LoadedKernelInfo>& kernels() const override { return infos_; }
  int64_t working_memory_bytes() const override { return scratch_.total_bytes(); }

 private:
  absl::Status do_set_inputs(const TensorMap& inputs) override {
    const Graph& g = *plan_.graph;  // inputs checked by set_inputs()
    for (int32_t id : g.inputs()) {
      auto it = buffers_.find(id);
      if (it != buffers_.end()) encode_storage(inputs.at(g.node(id).name), it->second.data());
    }
    return absl::OkStatus();
  }

  absl::Status do_poison_outputs() override {
    for (const Kernel& k : plan_.kernels) {
      for (int32_t id : k.writes) {
        HostBuffer& b = buffers_.at(id);
        std::memset(b.data(), 0xFF, static_cast<size_t>(b.bytes()));
      }
    }
    return absl::OkStatus();
  }

  absl::Status do_run_kernel(size_t k) override {
    CpuKernel& kernel = kernels_.at(k);
    std::atomic<int> failed{0};
    const HostModule::Entry entry = kernel.entry;
    void* const* args = kernel.args.data();
    const int64_t scratch_floats = kernel.scratch_floats;
    ThreadPool::global().parallel_for(kernel.count, kernel.grain, [&](int64_t begin, int64_t end) {
      float* scratch = scratch_floats > 0 ? scratch_.get(scratch_floats) : nullptr;
      if (scratch_floats > 0 && scratch == nullptr) {
        failed = 1;
        return;
      }
      if (entry(args, begin, end, scratch) != 0) failed = 1;
    });
    if (failed) {
      return absl::ResourceExhaustedError(fmt::format("kernel {}: out of host memory for its working arrays ({} bytes "
                                                      "per thread)",
                                                      kernel.name, scratch_floats * 4));
    }
    return absl::OkStatus();
  }

  absl::StatusOr<double> do_time_kernel(size_t k) override {
    const auto start = std::chrono::steady_clock::now();
    if (absl::Status s = do_run_kernel(k); !s.ok()) return s;
    return us_since(start);
  }

  absl::StatusOr<double> do_measure_kernel_bytes(size_t) override {
    return absl::UnimplementedError("memory traffic counters are not read on the CPU");
  }

  absl::StatusOr<TensorMap> do_outputs() override {
    const Graph& g = *plan_.graph;
    TensorMap out;
    for (int32_t id : g.outputs()) {
      const Node& n = g.node(id);
      out.emplace(n.name, decode_storage(n.dtype, n.shape, buffers_.at(id).data()));
    }
    return out;
  }

  absl::Status do_write_input(int32_t id, const void* data) override {
    HostBuffer& b = buffers_.at(id);
    std::memcpy(b.data(), data, static_cast<size_t>(b.bytes()));
    return absl::OkStatus();
  }

  absl::Status do_read_output(int32_t id, void* data) override {
    const HostBuffer& b = buffers_.at(id);
    std::memcpy(data, b.data(), static_cast<size_t>(b.bytes()));
    return absl::OkStatus();
  }

  absl::Status do_set_dropout_seed(int32_t id, uint64_t seed) override {
    for (size_t k = 0; k < kernels_.size(); ++k) {
      const std::vector<int32_t> dropouts = emit::dropout_nodes(*plan_.graph, plan_.kernels[k]);
      for (size_t i = 0; i < dropouts.size(); ++i) {
        if (dropouts[i] == id) kernels_[k].seeds.at(i) = seed;  // args point into seeds
      }
    }
    return absl::OkStatus();
  }

  explicit CpuLoadedPlan(const FusionPlan& plan) : plan_(plan) {}

  absl::Status allocate(const LoadOptions& options) {
    const Graph& g = *plan_.graph;
    std::vector<int32_t> tensors = g.inputs();
    const std::vector<int32_t> outputs = g.outputs();
    tensors.insert(tensors.end(), outputs.begin(), outputs.end());
    for (const Kernel& k : plan_.kernels) {
      tensors.insert(tensors.end(), k.reads.begin(), k.reads.end());
      tensors.insert(tensors.end(), k.writes.begin(), k.writes.end());
    }
    for (int32_t id : tensors) {
      if (buffers_.contains(id)) continue;
      const Node& n = g.node(id);
      // Kernels index typed pointers: an offset inside an element is
      // undefined behaviour, refused as the CUDA backend refuses it.
      if (options.misalign_bytes % dtype_size(n.dtype) != 0) {
        return absl::InvalidArgumentError(fmt::format("misalign_bytes {} would misalign the {}-byte elements of {}",
                                                      options.misalign_bytes, dtype_size(n.dtype), describe(n)));
      }
      absl::StatusOr<HostBuffer> b =
          HostBuffer::allocate(storage_bytes(n.dtype, n.shape), options.misalign_bytes, describe(n));
      if (!b.ok()) return b.status();
      buffers_.emplace(id, *std::move(b));
    }
    return absl::OkStatus();
  }

  // Compiles each distinct kernel once (codegen/shared_code.h: the layers
  // of a model share their kernels' code), as one module per hardware
  // thread at most, the modules at the same time: the host compiler is a
  // process per module, and each run pays start-up, parsing and linking
  // once for all its kernels (cpu_module_source), while several runs use
  // several cores.
  absl::Status compile() {
    const Graph& g = *plan_.graph;
    std::vector<int> all(plan_.kernels.size());
    for (size_t i = 0; i < all.size(); ++i) all[i] = static_cast<int>(i);
    const std::vector<CodeGroup> groups = group_same_code(
        plan_, all, [](const FusionPlan& p, int index, int) { return emit_cpu_kernel(p, index).source; });
    kernels_.resize(plan_.kernels.size());
    std::vector<CpuKernelSource> sources;  // one per group
    for (const CodeGroup& group : groups) {
      sources.push_back(emit_cpu_kernel(group.code_plan(plan_), group.code_index()));
      const CpuKernelSource& code = sources.back();
      for (int member : group.members) {
        const Kernel& kernel = plan_.kernels[static_cast<size_t>(member)];
        CpuKernel& k = kernels_[static_cast<size_t>(member)];
        k.name = kernel.name;
        // Its own work: kernels of different row counts share one source
        // (the count is an argument), and ran the first member's rows (a
        // larger member's rest unwritten; a smaller one's heap overrun).
        const CpuWorkSplit split = cpu_work_split(g, kernel);
        k.count = split.count;
        k.grain = split.grain;
        k.scratch_floats = code.scratch_floats;
        if (member != group.members.front()) k.shares_code_with = plan_.kernels[group.members.front()].name;
        k.seeds = emit::dropout_seeds(g, kernel);
        const std::vector<KernelParam> params = emit::kernel_params(plan_, kernel);
        if (params.size() != code.params.size()) {
          return absl::InternalError(fmt::format("kernel {} takes {} arguments, the code it shares takes {}",
                                                 kernel.name, params.size(), code.params.size()));
        }
        for (const KernelParam& p : params) {
          k.args.push_back(p.kind == ParamKind::kDropoutSeeds ? static_cast<void*>(k.seeds.data())
                                                               : buffers_.at(p.node).data());
        }
      }
    }
    const size_t modules = std::min<size_t>(groups.size(), static_cast<size_t>(usable_cpu_count()));
    // Module m holds groups [first(m), first(m + 1)): consecutive, as even as can be.
    auto first = [&](size_t m) { return m * groups.size() / std::max<size_t>(modules, 1); };
    std::vector<absl::Status> status(modules);
    run_jobs(modules, static_cast<int>(modules), [&](size_t m) {
      std::vector<const CpuKernelSource*> module_sources;
      std::vector<std::string> entries;
      for (size_t i = first(m); i < first(m + 1); ++i) {
        module_sources.push_back(&sources[i]);
        entries.push_back(sources[i].name);
      }
      const std::string name =
          entries.size() == 1 ? entries.front() : fmt::format("{}..{}", entries.front(), entries.back());
      absl::StatusOr<std::unique_ptr<HostModule>> c =
          compile_host_module(name, cpu_module_source(module_sources), entries, &KernelCache::global());
      if (!c.ok()) {
        status[m] = c.status();
        return;
      }
      std::shared_ptr<const HostModule> module = *std::move(c);
      for (size_t i = first(m); i < first(m + 1); ++i) {
        for (int member : groups[i].members) {
          CpuKernel& k = kernels_[static_cast<size_t>(member)];
          k.module = module;
          k.entry = module->entry(sources[i].name);
          if (member == groups[i].members.front()) {
            k.compile_ms = module->compile_ms() / static_cast<double>(entries.size());
          }
        }
      }
    });
    for (const absl::Status& s : status) {
      if (!s.ok()) return s;
    }
    for (const CpuKernel& k : kernels_) {
      infos_.push_back({.name = k.name,
                        .executed_by = "jit",
                        .compile_ms = k.compile_ms,
                        .cache_hit = k.module->cache_hit(),
                        .shares_code_with = k.shares_code_with,
                        .launch_shape = {},  // GPU only
                        .tuning = {},
                        .library_call = {}});  // the CPU's GEMMs are generated too
    }
    return absl::OkStatus();
  }

  FusionPlan plan_;
  std::map<int32_t, HostBuffer> buffers_;
  std::vector<CpuKernel> kernels_;
  std::vector<LoadedKernelInfo> infos_;
  WorkerScratch scratch_{ThreadPool::global().size()};  // the kernels' working memory, per pool thread
};

// A multi-threaded copy with streaming stores (streaming_copy), each thread
// copying the megabytes it wrote first, as the kernels' threads do.
class CpuCopyTimer final : public CopyTimer {
 public:
  CpuCopyTimer(HostBuffer src, HostBuffer dst) : src_(std::move(src)), dst_(std::move(dst)) {
    // Written once, so that every page exists before anything is timed.
    ThreadPool::global().parallel_for(src_.bytes(), 1 << 20, [&](int64_t b, int64_t e) {
      std::memset(static_cast<char*>(src_.data()) + b, 1, static_cast<size_t>(e - b));
      std::memset(static_cast<char*>(dst_.data()) + b, 0, static_cast<size_t>(e - b));
    });
  }
  absl::StatusOr<double> time_us() override {
    const char* s = static_cast<const char*>(src_.data());
    char* d = static_cast<char*>(dst_.data());
    const auto start = std::chrono::steady_clock::now();
    ThreadPool::global().parallel_for(
        src_.bytes(), 1 << 20, [&](int64_t b, int64_t e) { streaming_copy(d + b, s + b, static_cast<size_t>(e - b)); });
    return us_since(start);
  }

 private:
  HostBuffer src_, dst_;
};

class CpuBackend final : public Backend {
 public:
  explicit CpuBackend(HostCompiler compiler) : compiler_(std::move(compiler)) {}

  std::string_view name() const override { return "cpu"; }
  std::string description() const override {
    return fmt::format("{}, {}, {}", host_cpu_model(), counted(ThreadPool::global().size(), "thread"),
                       compiler_.identity);
  }
  // Planning needs no measured figure (a CPU reads any row once).
  FusionOptions fusion_options() const override { return fusion_options_for(cpu_identity()); }

  // Calibrated with JIT kernels on first use (cached on disk after that).
  DeviceSpec device() const override {
    std::lock_guard<std::mutex> lock(device_mutex_);
    if (!device_) {
      absl::StatusOr<DeviceSpec> d = calibrated_cpu_device(const_cast<CpuBackend&>(*this));
      if (!d.ok()) {
        warn(fmt::format("cpu device: calibrating with JIT kernels failed ({}); using the library's figures",
                         status_text(d.status())));
        d = cpu_device();
      }
      device_ = *d;
    }
    return *device_;
  }

  absl::StatusOr<std::unique_ptr<LoadedPlan>> load(const FusionPlan& plan, const LoadOptions& options) override {
    if (absl::Status s = verify_plan(plan); !s.ok()) return s;
    absl::StatusOr<std::unique_ptr<CpuLoadedPlan>> loaded = CpuLoadedPlan::load(plan, options);
    if (!loaded.ok()) return loaded.status();
    return std::unique_ptr<LoadedPlan>(*std::move(loaded));
  }

  absl::StatusOr<std::unique_ptr<CopyTimer>> prepare_copy(int64_t bytes) override {
    if (bytes <= 0) return absl::InvalidArgumentError(fmt::format("a copy of {} bytes", bytes));
    absl::StatusOr<HostBuffer> src = HostBuffer::allocate(bytes, 0, "the copy benchmark's source");
    if (!src.ok()) return src.status();
    absl::StatusOr<HostBuffer> dst = HostBuffer::allocate(bytes, 0, "the copy benchmark's destination");
    if (!dst.ok()) return dst.status();
    return std::unique_ptr<CopyTimer>(new CpuCopyTimer(*std::move(src), *std::move(dst)));
  }

  std::optional<double> measure_launch_us() override { return measure_pool_launch_us(); }

  absl::Status flush_cache() override {
    if (!flush_) {
      // Four times the last-level cache; where the system does not report
      // its size (some virtual machines), 256 MiB: 8 times the 32 MiB L3
      // one chiplet of a current server CPU shares among its cores (2.7
      // times a 96 MiB stacked-cache one).
      const int64_t cache = device().cache_bytes;
      const int64_t bytes = cache > 0 ? 4 * std::max<int64_t>(cache, int64_t{8} << 20) : int64_t{256} << 20;
      absl::StatusOr<HostBuffer> b = HostBuffer::allocate(bytes, 0, "the cache flush buffer");
      if (!b.ok()) return b.status();
      flush_ = std::make_unique<HostBuffer>(*std::move(b));
      // Written once, by the threads that will read it, so that its pages
      // exist: a page never written reads as the kernel's shared zero page,
      // which would leave the cache as it was. The dirty lines this leaves
      // are written back during the first flush's reads, outside any timing.
      char* p = static_cast<char*>(flush_->data());
      ThreadPool::global().parallel_for(flush_->bytes(), 1 << 20, [&](int64_t begin, int64_t end) {
        std::memset(p + begin, 1, static_cast<size_t>(end - begin));
      });
    }
    // Read-only, as on the GPU (fj_l2_flush): the cache ends up holding
    // clean lines of this buffer, and the dirty lines of the kernels before
    // (their outputs) are written back during the sweep. A flush that wrote
    // would leave up to a cache's worth of dirty lines, whose write-back the
    // next kernel pays for inside its timed interval: more for a plan of
    // more kernels, which would flatter fusion.
    const auto* words = static_cast<const uint64_t*>(flush_->data());
    std::atomic<uint64_t> sink{0};
    ThreadPool::global().parallel_for(flush_->bytes() / 64, 1 << 14, [&](int64_t begin, int64_t end) {
      uint64_t acc = 0;
      for (int64_t line = begin; line < end; ++line) acc ^= words[line * 8];  // one word per 64-byte line
      sink.fetch_xor(acc, std::memory_order_relaxed);
    });
    flush_sink_ = sink.load(std::memory_order_relaxed);
    return absl::OkStatus();
  }

 private:
  HostCompiler compiler_;
  mutable std::mutex device_mutex_;
  mutable std::optional<DeviceSpec> device_;
  std::unique_ptr<HostBuffer> flush_;
  uint64_t flush_sink_ = 0;  // what the flush read: keeps its loads observable
};

}  // namespace

absl::StatusOr<std::unique_ptr<Backend>> make_cpu_backend() {
  absl::StatusOr<HostCompiler> compiler = find_host_compiler();
  if (!compiler.ok()) return compiler.status();
  return std::unique_ptr<Backend>(std::make_unique<CpuBackend>(*compiler));
}

}  // namespace fusejit
