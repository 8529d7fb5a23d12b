#include "runtime/cuda_backend_plan.h"

#include <algorithm>
#include <map>
#include <optional>
#include <variant>
#include <vector>

#include <fmt/format.h>

#include "codegen/cuda/cuda_emitter.h"
#include "codegen/kernel_names.h"
#include "codegen/shared_code.h"
#include "ir/error.h"
#include "ir/messages.h"
#include "ir/philox.h"
#include "runtime/cuda_backend_launch.h"
#include "runtime/cuda_backend_matmul.h"
#include "runtime/cuda_row_tuning.h"
#include "runtime/dram_counters.h"
#include "runtime/nvrtc_compiler.h"
#include "runtime/occupancy.h"
#include "runtime/tensor_storage.h"

namespace fusejit::cuda_backend {
namespace {

// Buffers get this much slack, so that LoadOptions::misalign_bytes (0..63)
// can shift a tensor without running past its allocation.
constexpr int kMisalignSlack = 64;

struct TensorBuffer {
  DeviceBuffer memory;
  cuda::DevicePtr ptr = 0;  // memory.get() + misalign_bytes
  int64_t bytes = 0;
  bool poisoned = false;  // written by a kernel (or a graph output): poison_outputs() fills it
};

// One launch shape of a generated kernel, compiled and loaded.
struct CompiledShape {
  CudaKernelSource meta;  // launch parameters; the source text is dropped once compiled
  std::shared_ptr<const ModuleHandle> module;
  cuda::Function function = nullptr;
  int registers = 0;  // 0 where ptxas did not run (a PTX-only build)
  int spill_bytes = 0;
  int blocks_per_sm = 0;  // resident blocks per SM by its registers and shared memory; 0 when unknown
  std::string shape;      // cuda_launch_shape(meta)
};

// The compiled code of a group of kernels that share it
// (codegen/shared_code.h): its default launch shape first, then the others
// worth timing (runtime/cuda_row_tuning.h). `chosen` is the one launched;
// until `tuned`, the default.
struct KernelCode {
  std::vector<CompiledShape> shapes;
  size_t chosen = 0;
  bool tuned = true;            // false until the shapes are timed, where there are several
  std::vector<size_t> members;  // the plan's kernels that run this code
};

// A generated kernel of the plan: its code and its own arguments.
struct JitKernel {
  std::shared_ptr<KernelCode> code;
  // The tensor pointers, in params order.
  std::vector<cuda::DevicePtr> pointers;
  // The kernel's last parameter when it has dropout ops: each seed's Philox
  // round keys (fj_dropout_keys<N>, passed by value), in node order.
  std::vector<uint32_t> dropout_keys;
  // Its own element or row count (cuda_launch_count): the code it shares
  // may be another kernel's of another size.
  long long count = 0;
};

class CudaLoadedPlan final : public LoadedPlan {
 public:
  CudaLoadedPlan(std::shared_ptr<CudaGpu> gpu, const FusionPlan& plan) : gpu_(std::move(gpu)), plan_(plan) {}

  absl::Status load(const LoadOptions& options);

  const FusionPlan& plan() const override { return plan_; }
  const std::vector<LoadedKernelInfo>& kernels() const override { return infos_; }

 private:
  absl::Status do_set_inputs(const TensorMap& inputs) override;
  absl::Status do_poison_outputs() override;
  absl::Status do_run_kernel(size_t k) override;
  absl::StatusOr<double> do_time_kernel(size_t k) override;
  absl::StatusOr<double> do_measure_kernel_bytes(size_t k) override;
  absl::StatusOr<TensorMap> do_outputs() override;
  absl::Status do_write_input(int32_t id, const void* data) override;
  absl::Status do_read_output(int32_t id, void* data) override;
  absl::Status do_set_dropout_seed(int32_t id, uint64_t seed) override;

  absl::Status allocate(int32_t node, bool poisoned, int misalign);
  // Compiles and loads the generated kernels; steps_[k] for each of them.
  absl::Status load_jit_kernels(std::vector<std::optional<JitKernel>>& jit, Autotune autotune);
  absl::Status launch(size_t k);
  absl::Status launch_shape(size_t k, const CompiledShape& shape);
  // Times the launch shapes of kernel k's code on its first launch and keeps the fastest.
  absl::Status tune(size_t k);
  // "kernel k1_gelu (2 of 4, fused plan)", for errors.
  std::string kernel_label(size_t k) const;
  absl::Status about_kernel(size_t k, const absl::Status& s) const;

  // Declared first, so destroyed last: everything below lives in its context.
  std::shared_ptr<CudaGpu> gpu_;
  FusionPlan plan_;
  std::vector<LoadedKernelInfo> infos_;
  std::map<int32_t, TensorBuffer> buffers_;                 // by node id of plan_.graph
  std::vector<std::variant<JitKernel, MatmulStep>> steps_;  // one per kernel, in plan order
  std::optional<EventTimer> timer_;
};

absl::Status CudaLoadedPlan::allocate(int32_t node, bool poisoned, int misalign) {
  auto [it, inserted] = buffers_.try_emplace(node);
  it->second.poisoned = it->second.poisoned || poisoned;
  if (!inserted) return absl::OkStatus();
  const Node& n = plan_.graph->node(node);
  if (misalign % dtype_size(n.dtype) != 0) {
    return absl::InvalidArgumentError(fmt::format("misalign_bytes {} would misalign the {}-byte elements of {}",
                                                  misalign, dtype_size(n.dtype), describe(n)));
  }
  const int64_t bytes = storage_bytes(n.dtype, n.shape);
  absl::StatusOr<DeviceBuffer> memory =
      DeviceBuffer::allocate(static_cast<size_t>(bytes) + kMisalignSlack,
                             fmt::format("tensor {} ({} bytes) of the {} plan", describe(n), bytes, plan_.label));
  if (!memory.ok()) return memory.status();
  it->second.memory = *std::move(memory);
  it->second.ptr = it->second.memory.get() + misalign;
  it->second.bytes = bytes;
  return absl::OkStatus();
}

absl::Status CudaLoadedPlan::load(const LoadOptions& options) {
  if (options.misalign_bytes < 0 || options.misalign_bytes >= kMisalignSlack) {
    return absl::InvalidArgumentError(
        fmt::format("misalign_bytes must be 0..{}, got {}", kMisalignSlack - 1, options.misalign_bytes));
  }
  const Graph& g = *plan_.graph;
  for (const Kernel& kernel : plan_.kernels) {
    for (int32_t id : kernel.reads) {
      if (absl::Status s = allocate(id, false, options.misalign_bytes); !s.ok()) return s;
    }
    for (int32_t id : kernel.writes) {
      if (absl::Status s = allocate(id, true, options.misalign_bytes); !s.ok()) return s;
    }
    // cuBLAS writes a plain matmul's result even if no later kernel reads
    // it; a matmul with an epilogue writes only the epilogue's last value.
    if (kernel.kind == KernelKind::kMatmul && kernel.nodes.size() == 1) {
      if (absl::Status s = allocate(kernel.nodes.front(), true, options.misalign_bytes); !s.ok()) return s;
    }
  }
  for (int32_t id : g.outputs()) {  // an output that is a graph input is copied through
    if (absl::Status s = allocate(id, g.node(id).op != Op::kInput, options.misalign_bytes); !s.ok()) return s;
  }
  std::vector<std::optional<JitKernel>> jit(plan_.kernels.size());
  if (absl::Status s = load_jit_kernels(jit, options.autotune); !s.ok()) return s;
  for (size_t k = 0; k < plan_.kernels.size(); ++k) {
    const Kernel& kernel = plan_.kernels[k];
    if (kernel.kind != KernelKind::kMatmul) {
      steps_.emplace_back(*std::move(jit[k]));
      continue;
    }
    // Every tensor it touches was allocated above, a plain matmul's result
    // even where nothing reads it (an unused matmul of the unfused plan,
    // found by `fusejit fuzz` on the CPU).
    absl::StatusOr<MatmulStep> step =
        MatmulStep::prepare(*gpu_, plan_, kernel, [this](int32_t id) { return buffers_.at(id).ptr; });
    if (!step.ok()) return step.status();
    infos_[k] = LoadedKernelInfo{};
    infos_[k].name = kernel.name;
    infos_[k].executed_by = step->executed_by();
    infos_[k].library_call = step->summary();
    steps_.emplace_back(*std::move(step));
  }
  absl::StatusOr<EventTimer> timer = EventTimer::create();
  if (!timer.ok()) return timer.status();
  timer_.emplace(*std::move(timer));
  return absl::OkStatus();
}

// Each distinct generated kernel is compiled once (the layers of a model
// share their kernels' code), the programs several at a time, together with
// the other launch shapes of the kernels that will be tuned. Buffers never
// move once allocated, so the variant chosen from their addresses holds for
// every launch: a misaligned buffer can never take the 16-byte path.
absl::Status CudaLoadedPlan::load_jit_kernels(std::vector<std::optional<JitKernel>>& jit, Autotune autotune) {
  const Graph& g = *plan_.graph;
  infos_.resize(plan_.kernels.size());
  std::vector<int> generated;
  std::vector<CudaAccess> access(plan_.kernels.size(), CudaAccess::kScalar);
  for (size_t k = 0; k < plan_.kernels.size(); ++k) {
    const Kernel& kernel = plan_.kernels[k];
    if (kernel.kind == KernelKind::kMatmul) continue;
    generated.push_back(static_cast<int>(k));
    std::vector<cuda::DevicePtr> tensors;
    for (int32_t id : kernel.reads) tensors.push_back(buffers_.at(id).ptr);
    for (int32_t id : kernel.writes) tensors.push_back(buffers_.at(id).ptr);
    access[k] = access_for(tensors);
  }
  const std::vector<CodeGroup> groups =
      group_same_code(plan_, generated, [&](const FusionPlan& p, int index, int member) {
        return emit_cuda_kernel(p, index, access[static_cast<size_t>(member)]).source;
      });
  // Every program to compile, and which group and shape each is: the
  // default shapes first, then the other shapes of the kernels to be tuned.
  // Those are a bonus: should any fail to compile, the defaults run untuned.
  std::vector<CudaKernelSource> sources;
  std::vector<CudaSource> programs;
  std::vector<size_t> group_of;
  const auto add = [&](size_t group, const CudaRowShape& shape) {
    const FusionPlan& code_plan = groups[group].code_plan(plan_);
    const CudaAccess a = access[static_cast<size_t>(groups[group].members.front())];
    sources.push_back(emit_cuda_kernel(code_plan, groups[group].code_index(), a, shape));
    // The shape in the program's name tells FUSEJIT_DUMP's files apart.
    const std::string suffix =
        shape == CudaRowShape{}
            ? ""
            : fmt::format(
                  "_{}t{}", sources.back().block_threads,
                  sources.back().prefetch_rows > 0 ? fmt::format("_prefetch{}", sources.back().prefetch_rows) : "");
    programs.push_back({sources.back().name + suffix, sources.back().source});
    group_of.push_back(group);
  };
  std::vector<std::vector<CudaRowShape>> other_shapes(groups.size());
  for (size_t i = 0; i < groups.size(); ++i) {
    add(i, CudaRowShape{});
    const FusionPlan& code_plan = groups[i].code_plan(plan_);
    const CudaAccess a = access[static_cast<size_t>(groups[i].members.front())];
    std::vector<CudaRowShape> shapes = cuda_row_shape_candidates(code_plan, groups[i].code_index(), a);
    const Kernel& kernel = code_plan.kernels[static_cast<size_t>(groups[i].code_index())];
    if (should_autotune(autotune, kernel.iteration.numel(), shapes.size())) {
      other_shapes[i].assign(shapes.begin() + 1, shapes.end());
    }
  }
  const size_t defaults = programs.size();
  for (size_t i = 0; i < groups.size(); ++i) {
    for (const CudaRowShape& shape : other_shapes[i]) add(i, shape);
  }
  const CudaCompileOptions compile_options{.arch = gpu_->arch()};
  absl::StatusOr<std::vector<CompiledKernel>> compiled =
      compile_cuda_all(std::vector<CudaSource>(programs.begin(), programs.begin() + static_cast<long>(defaults)),
                       compile_options, &KernelCache::global());
  if (!compiled.ok()) return compiled.status();
  std::string untuned;  // why the other shapes are not timed, when they failed to compile
  if (programs.size() > defaults) {
    absl::StatusOr<std::vector<CompiledKernel>> others =
        compile_cuda_all(std::vector<CudaSource>(programs.begin() + static_cast<long>(defaults), programs.end()),
                         compile_options, &KernelCache::global());
    if (others.ok()) {
      for (CompiledKernel& c : *others) compiled->push_back(std::move(c));
    } else {
      untuned = fmt::format("default shape only: another launch shape did not compile: {}",
                            status_text(others.status()).substr(0, 500));
      warn(untuned);
    }
  }
  const GpuInfo& gpu_info = gpu_->info();
  const SmLimits sm = sm_limits(gpu_info.cc_major, gpu_info.cc_minor);
  std::vector<std::shared_ptr<KernelCode>> codes(groups.size());
  std::vector<double> compile_ms(groups.size(), 0);
  std::vector<bool> cache_hit(groups.size(), true);
  for (size_t p = 0; p < compiled->size(); ++p) {
    const CompiledKernel& c = (*compiled)[p];
    absl::StatusOr<ModuleHandle> module = ModuleHandle::load(c);
    if (!module.ok()) return module.status();
    auto shared = std::make_shared<const ModuleHandle>(*std::move(module));
    absl::StatusOr<cuda::Function> function = cuda::module_function(shared->get(), sources[p].name);
    if (!function.ok()) return function.status();
    sources[p].source.clear();
    std::shared_ptr<KernelCode>& code = codes[group_of[p]];
    if (!code) code = std::make_shared<KernelCode>();
    const int registers = std::max(0, c.ptxas.registers);  // -1 (no ptxas) for PTX-only builds
    const int threads = sources[p].block_threads * sources[p].rows_per_block;
    code->shapes.push_back(
        {.meta = sources[p],
         .module = shared,
         .function = *function,
         .registers = registers,
         .spill_bytes = static_cast<int>(c.ptxas.spill_bytes()),
         .blocks_per_sm =
             registers > 0 ? theoretical_occupancy(sm, threads, registers, c.ptxas.shared_bytes).blocks_per_sm : 0,
         .shape = cuda_launch_shape(sources[p])});
    compile_ms[group_of[p]] += c.compile_ms;
    cache_hit[group_of[p]] = cache_hit[group_of[p]] && c.cache_hit;
  }
  for (size_t i = 0; i < groups.size(); ++i) {
    KernelCode& code = *codes[i];
    code.tuned = code.shapes.size() < 2;
    const std::vector<KernelParam>& code_params = code.shapes.front().meta.params;
    const std::string& first = plan_.kernels[static_cast<size_t>(groups[i].members.front())].name;
    for (int member : groups[i].members) {
      const Kernel& kernel = plan_.kernels[static_cast<size_t>(member)];
      const std::vector<KernelParam> params = emit::kernel_params(plan_, kernel);
      if (params.size() != code_params.size()) {
        return absl::InternalError(fmt::format("kernel {} takes {} arguments, the code it shares takes {}", kernel.name,
                                               params.size(), code_params.size()));
      }
      code.members.push_back(static_cast<size_t>(member));
      JitKernel& j = jit[static_cast<size_t>(member)].emplace();
      j.code = codes[i];
      j.count = cuda_launch_count(kernel);
      for (const KernelParam& p : params) {
        if (p.kind == ParamKind::kTensor) j.pointers.push_back(buffers_.at(p.node).ptr);
      }
      for (uint64_t seed : emit::dropout_seeds(g, kernel)) {
        const PhiloxRoundKeys keys = philox_round_keys(dropout_key(seed));
        j.dropout_keys.insert(j.dropout_keys.end(), keys.begin(), keys.end());
      }
      const bool own = member == groups[i].members.front();
      const CompiledShape& shape = code.shapes.front();
      infos_[static_cast<size_t>(member)] = {
          .name = kernel.name,
          .executed_by = "jit",
          .compile_ms = own ? compile_ms[i] : 0,
          .cache_hit = cache_hit[i],
          .registers = shape.registers,
          .spill_bytes = shape.spill_bytes,
          .shares_code_with = own ? "" : first,
          .launch_shape = shape.shape,
          .tuning = !code.tuned
                        ? fmt::format("{} launch shapes compiled, to be timed on its first run", code.shapes.size())
                    : other_shapes[i].empty() ? ""
                                              : untuned,
          .library_call = {}};  // generated
    }
  }
  return absl::OkStatus();
}

absl::Status CudaLoadedPlan::do_set_inputs(const TensorMap& inputs) {
  // The inputs were checked by set_inputs().
  absl::StatusOr<cuda::ContextScope> context = gpu_->enter();
  if (!context.ok()) return context.status();
  std::vector<uint8_t> host;
  for (int32_t id : plan_.graph->inputs()) {
    auto it = buffers_.find(id);
    if (it == buffers_.end()) continue;  // an input no kernel reads
    const HostTensor& tensor = inputs.at(plan_.graph->node(id).name);
    host.resize(static_cast<size_t>(it->second.bytes));
    encode_storage(tensor, host.data());
    if (absl::Status s = cuda::memcpy_htod(it->second.ptr, host.data(), host.size()); !s.ok()) {
      return absl::Status(
          s.code(), fmt::format("copying input {} to the GPU: {}", describe(plan_.graph->node(id)), status_text(s)));
    }
  }
  return absl::OkStatus();
}

absl::Status CudaLoadedPlan::do_poison_outputs() {
  absl::StatusOr<cuda::ContextScope> context = gpu_->enter();
  if (!context.ok()) return context.status();
  for (const auto& [id, buffer] : buffers_) {
    if (!buffer.poisoned) continue;
    if (absl::Status s = cuda::memset_d8(buffer.ptr, 0xFF, static_cast<size_t>(buffer.bytes)); !s.ok()) return s;
  }
  return cuda::context_synchronize();
}

std::string CudaLoadedPlan::kernel_label(size_t k) const {
  return fmt::format("kernel {} ({} of {}, {} plan)", plan_.kernels[k].name, k + 1, plan_.kernels.size(), plan_.label);
}

absl::Status CudaLoadedPlan::about_kernel(size_t k, const absl::Status& s) const {
  if (s.ok()) return s;
  return absl::Status(s.code(), fmt::format("{}: {}", kernel_label(k), status_text(s)));
}

absl::Status CudaLoadedPlan::launch(size_t k) {
  if (MatmulStep* step = std::get_if<MatmulStep>(&steps_[k])) return step->launch(*gpu_);
  const KernelCode& code = *std::get<JitKernel>(steps_[k]).code;
  return launch_shape(k, code.shapes[code.chosen]);
}

absl::Status CudaLoadedPlan::launch_shape(size_t k, const CompiledShape& shape) {
  JitKernel& kernel = std::get<JitKernel>(steps_[k]);
  long long count = kernel.count;
  std::vector<void*> args;
  for (cuda::DevicePtr& p : kernel.pointers) args.push_back(&p);
  if (!kernel.dropout_keys.empty()) args.push_back(kernel.dropout_keys.data());
  args.push_back(&count);
  const LaunchConfig config =
      launch_config(shape.meta, gpu_->info().sm_count, gpu_->max_threads_per_sm(), shape.blocks_per_sm, count);
  return cuda::launch_kernel(shape.function, config.grid, config.block, 0, nullptr, args.data());
}

// Every shape writes the same outputs from the same inputs (a kernel never
// writes what it reads), so timing them on the plan's own buffers changes
// nothing the next launch does not write again. Tuning is a bonus: should
// it fail (no memory for the L2 flush buffer, a launch error), the default
// shape stays and the run goes on, unless the error broke the context
// (cuda::context_lost()): then nothing can go on, and it is returned.
absl::Status CudaLoadedPlan::tune(size_t k) {
  JitKernel* kernel = std::get_if<JitKernel>(&steps_[k]);
  if (kernel == nullptr || kernel->code->tuned) return absl::OkStatus();
  KernelCode& code = *kernel->code;
  code.tuned = true;
  std::vector<std::optional<double>> best_us(code.shapes.size());
  const auto time_shapes = [&]() -> absl::Status {
    for (int launch = -1; launch < kAutotuneLaunches; ++launch) {  // launch -1 warms each shape up
      for (size_t v = 0; v < code.shapes.size(); ++v) {
        if (absl::Status s = gpu_->queue_l2_flush(); !s.ok()) return s;
        if (absl::Status s = timer_->start(); !s.ok()) return s;
        if (absl::Status s = launch_shape(k, code.shapes[v]); !s.ok()) {
          return absl::Status(s.code(), fmt::format("launching {}: {}", code.shapes[v].shape, status_text(s)));
        }
        absl::StatusOr<double> ms = timer_->stop_ms();
        if (!ms.ok()) return ms.status();
        if (launch >= 0 && (!best_us[v] || *ms * 1e3 < *best_us[v])) best_us[v] = *ms * 1e3;
      }
    }
    return absl::OkStatus();
  };
  std::string note;
  if (absl::Status s = time_shapes(); s.ok()) {
    code.chosen = pick_launch_shape(best_us);
    std::vector<std::string> names;
    for (const CompiledShape& shape : code.shapes) names.push_back(shape.shape);
    note = describe_tuning(names, best_us, code.chosen);
  } else if (cuda::context_lost()) {
    return absl::Status(s.code(), fmt::format("timing the launch shapes of {}: {}", kernel_label(k), status_text(s)));
  } else {
    code.chosen = 0;
    note = fmt::format("default shape kept: timing the launch shapes failed: {}", status_text(s));
    warn(fmt::format("{}: {}", kernel_label(k), note));
  }
  const CompiledShape& chosen = code.shapes[code.chosen];
  for (size_t member : code.members) {
    infos_[member].registers = chosen.registers;
    infos_[member].spill_bytes = chosen.spill_bytes;
    infos_[member].launch_shape = chosen.shape;
    infos_[member].tuning = note;
  }
  return absl::OkStatus();
}

absl::Status CudaLoadedPlan::do_run_kernel(size_t k) {
  absl::StatusOr<cuda::ContextScope> context = gpu_->enter();
  if (!context.ok()) return context.status();
  if (absl::Status s = tune(k); !s.ok()) return s;
  if (absl::Status s = launch(k); !s.ok()) return about_kernel(k, s);
  return about_kernel(k, cuda::context_synchronize());
}

absl::StatusOr<double> CudaLoadedPlan::do_time_kernel(size_t k) {
  absl::StatusOr<cuda::ContextScope> context = gpu_->enter();
  if (!context.ok()) return context.status();
  if (const JitKernel* jit = std::get_if<JitKernel>(&steps_[k]); jit != nullptr && !jit->code->tuned) {
    if (absl::Status s = tune(k); !s.ok()) return s;
    // Tuning used the L2 flush the caller queued for this timing.
    if (absl::Status s = gpu_->queue_l2_flush(); !s.ok()) return about_kernel(k, s);
  }
  absl::StatusOr<double> us = time_with_write_back_us(*gpu_, *timer_, [&] { return launch(k); });
  if (!us.ok()) return about_kernel(k, us.status());
  return *us;
}

absl::StatusOr<double> CudaLoadedPlan::do_measure_kernel_bytes(size_t k) {
  if (cuda_driver_is_emulator()) return absl::UnavailableError("the CUDA emulator has no DRAM counters");
  absl::StatusOr<cuda::ContextScope> context = gpu_->enter();
  if (!context.ok()) return context.status();
  if (absl::Status s = tune(k); !s.ok()) return s;
  // A profiler for this measurement only: one enabled on the context would
  // stay in the way of other plans' profilers and of later timings.
  absl::StatusOr<std::unique_ptr<DramByteCounter>> counter = DramByteCounter::create(gpu_->context(), gpu_->device());
  if (!counter.ok()) return counter.status();
  // From an L2 without this plan's data or dirty lines, and with the L2
  // drained after it, so that the kernel's own writes still in L2 count.
  if (absl::Status s = gpu_->flush_l2(); !s.ok()) return about_kernel(k, s);
  absl::StatusOr<double> bytes = (*counter)->measure(
      [&]() -> absl::Status {
        if (absl::Status s = launch(k); !s.ok()) return s;
        return cuda::context_synchronize();
      },
      [&] { return gpu_->flush_l2(); });
  if (!bytes.ok()) return about_kernel(k, bytes.status());
  return bytes;
}

absl::StatusOr<TensorMap> CudaLoadedPlan::do_outputs() {
  absl::StatusOr<cuda::ContextScope> context = gpu_->enter();
  if (!context.ok()) return context.status();
  TensorMap out;
  std::vector<uint8_t> host;
  for (int32_t id : plan_.graph->outputs()) {
    const Node& n = plan_.graph->node(id);
    const TensorBuffer& buffer = buffers_.at(id);
    host.resize(static_cast<size_t>(buffer.bytes));
    if (absl::Status s = cuda::memcpy_dtoh(host.data(), buffer.ptr, host.size()); !s.ok()) {
      return absl::Status(s.code(), fmt::format("copying output {} from the GPU: {}", describe(n), status_text(s)));
    }
    out[n.name] = decode_storage(n.dtype, n.shape, host.data());
  }
  return out;
}

absl::Status CudaLoadedPlan::do_write_input(int32_t id, const void* data) {
  auto it = buffers_.find(id);
  if (it == buffers_.end()) return absl::OkStatus();  // an input no kernel reads
  absl::StatusOr<cuda::ContextScope> context = gpu_->enter();
  if (!context.ok()) return context.status();
  if (absl::Status s = cuda::memcpy_htod(it->second.ptr, data, static_cast<size_t>(it->second.bytes)); !s.ok()) {
    return absl::Status(
        s.code(), fmt::format("copying input {} to the GPU: {}", describe(plan_.graph->node(id)), status_text(s)));
  }
  return absl::OkStatus();
}

absl::Status CudaLoadedPlan::do_read_output(int32_t id, void* data) {
  absl::StatusOr<cuda::ContextScope> context = gpu_->enter();
  if (!context.ok()) return context.status();
  const TensorBuffer& buffer = buffers_.at(id);
  if (absl::Status s = cuda::memcpy_dtoh(data, buffer.ptr, static_cast<size_t>(buffer.bytes)); !s.ok()) {
    return absl::Status(
        s.code(), fmt::format("copying output {} from the GPU: {}", describe(plan_.graph->node(id)), status_text(s)));
  }
  return absl::OkStatus();
}

absl::Status CudaLoadedPlan::do_set_dropout_seed(int32_t id, uint64_t seed) {
  const PhiloxRoundKeys keys = philox_round_keys(dropout_key(seed));
  for (size_t k = 0; k < steps_.size(); ++k) {
    JitKernel* j = std::get_if<JitKernel>(&steps_[k]);
    if (j == nullptr) continue;
    const std::vector<int32_t> dropouts = emit::dropout_nodes(*plan_.graph, plan_.kernels[k]);
    for (size_t i = 0; i < dropouts.size(); ++i) {
      if (dropouts[i] == id) std::copy(keys.begin(), keys.end(), j->dropout_keys.begin() + i * keys.size());
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::unique_ptr<LoadedPlan>> load_plan(std::shared_ptr<CudaGpu> gpu, const FusionPlan& plan,
                                                      const LoadOptions& options) {
  // bf16 arithmetic (cvt.rn.bf16.f32 and the like, which the kernels'
  // helpers use) needs compute capability 8.0: on an older GPU say which
  // tensor is bf16, rather than let NVRTC fail on a helper's line.
  if (gpu->info().cc_major < 8) {
    for (const Node& node : plan.graph->nodes()) {
      if (node.dtype != DType::kBF16) continue;
      return absl::FailedPreconditionError(fmt::format(
          "{} ({}) cannot run bf16 kernels, which need compute capability 8.0 or newer: {} is bf16; use f16 or f32, or "
          "--backend cpu",
          gpu->info().name, gpu->info().arch(), describe(node)));
    }
  }
  absl::StatusOr<cuda::ContextScope> context = gpu->enter();
  if (!context.ok()) return context.status();
  auto loaded = std::make_unique<CudaLoadedPlan>(std::move(gpu), plan);
  // On failure the half-loaded plan frees what it made.
  if (absl::Status s = loaded->load(options); !s.ok()) return s;
  return loaded;
}

}  // namespace fusejit::cuda_backend
