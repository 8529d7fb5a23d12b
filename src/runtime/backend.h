// Backends run the kernels of a FusionPlan on a device: the CPU (kernels
// compiled by the host C++ compiler) or a CUDA GPU (kernels compiled by
// NVRTC, launched through the driver API).
//
// A backend load()s a plan once: it emits and compiles every kernel (through
// the kernel cache) and allocates a buffer in device memory for every tensor
// a kernel reads or writes. The LoadedPlan then runs as often as asked on the
// inputs last given to it; nothing is compiled while it runs, and nothing is
// allocated after the first run (the CPU's working arrays are taken then,
// per thread, and kept), so the benchmark harness, which warms up first,
// times kernels and nothing else. On a GPU the first run of a large row
// kernel also times its launch shapes (runtime/cuda_row_tuning.h) and keeps
// the fastest; that too happens before the harness times anything.
//
// Buffers hold each tensor in its storage dtype (f32, or the 16-bit patterns
// of f16/bf16), row-major, 64-byte aligned unless a test asks otherwise.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <absl/status/status.h>
#include <absl/status/statusor.h>

#include "cost/cost_model.h"
#include "cost/device.h"
#include "fusion/plan.h"
#include "ir/interpreter.h"

namespace fusejit {

// How one kernel of a loaded plan was prepared.
struct LoadedKernelInfo {
  std::string name;        // the plan's kernel name
  std::string executed_by; // "jit" (generated and compiled) or the library that runs it ("cublas", "cpu-blas")
  double compile_ms = 0;   // 0 for library kernels
  bool cache_hit = false;
  int registers = 0;       // GPU only, from the ptxas report
  int spill_bytes = 0;     // GPU only
  // The kernel whose compiled code this one runs, with its own tensors and
  // seeds (codegen/shared_code.h); "" when it has its own. compile_ms is 0
  // for a kernel that shares code.
  std::string shares_code_with;
  // GPU: how the kernel is launched ("512 threads per row"), and, where its
  // launch shapes were timed against each other (runtime/cuda_row_tuning.h),
  // what was timed and kept; both empty for library kernels and on the CPU.
  std::string launch_shape;
  std::string tuning;
  // A kernel a library runs: the call, and why it is not the first choice
  // where it is not ("... -> f32 (cublasGemmEx), then epilogue add, relu as
  // generated kernel k0_epilogue, as cuBLASLt cannot run it here: ...");
  // empty for generated kernels.
  std::string library_call;
};

// Whether the CUDA backend times a row kernel's launch shapes on its first
// run and keeps the fastest (runtime/cuda_row_tuning.h).
enum class Autotune : uint8_t {
  kAuto,    // kernels of at least kAutotuneMinElements; FUSEJIT_AUTOTUNE=0 or 1 turns it off or on for all
  kOff,     // the default shape
  kAlways,  // every kernel that has other shapes, however small (tests)
};

struct LoadOptions {
  // Byte offset added to every buffer's address (0..63), so tests can run
  // kernels on pointers that are not 16-byte aligned. 0 in normal use.
  int misalign_bytes = 0;
  Autotune autotune = Autotune::kAuto;
};

// The public calls check what every backend would otherwise check alike
// (a kernel index in range, inputs given before a run, every kernel run
// before outputs are read) and return a Status naming what was wrong; the
// backend implements the private do_ functions.
//
// Threads: a LoadedPlan holds one set of buffers and its own state, so it
// is for one thread at a time (give each thread its own plan, or lock
// around the calls); separate plans, of one backend or several, may run on
// separate threads (CPU kernels take the process's thread pool in turn).
// Keep the Backend that loaded a plan alive while the plan is used.
class LoadedPlan {
 public:
  virtual ~LoadedPlan() = default;

  virtual const FusionPlan& plan() const = 0;
  virtual const std::vector<LoadedKernelInfo>& kernels() const = 0;

  // Copies one tensor per graph input (by name, dtype and shape as the graph
  // declares them; otherwise InvalidArgument naming the input, and the
  // inputs and results of before stay as they were) into its buffer.
  absl::Status set_inputs(const TensorMap& inputs);
  // Raw I/O, for callers who hold tensors in their storage form already (a
  // framework's bf16 array): the bytes are copied to or from the buffer as
  // they are, without the float64 HostTensor conversion of set_inputs() and
  // outputs(), which takes many times a memory-bound kernel's own time.
  // `data` holds the tensor dense and row-major in its storage dtype (float
  // for f32, the uint16_t bit patterns of f16 and bf16, as storage_bytes()
  // counts them); `bytes` must be exactly that size. Any bit pattern is
  // taken, NaN and inf included.
  //
  // set_input() sets one input by name; InvalidArgument for a name the graph
  // lacks or a wrong size, and nothing changes. The plan runs once every
  // input was given, by set_input() or set_inputs(); a new value of any
  // input makes every result stale until the kernels run again.
  absl::Status set_input(std::string_view name, const void* data, size_t bytes);
  // Copies graph output `name` into `data`; the same checks as outputs().
  absl::Status read_output(std::string_view name, void* data, size_t bytes);
  // A new seed for the dropout node `name` (a training step's fresh mask),
  // used from the next run on, without compiling anything again: seeds are
  // kernel arguments. The graph's seed until then. The mask is the one the
  // graph would draw with that seed, on every backend and in the reference
  // (build the graph with it to check). InvalidArgument for a name that is
  // not a dropout of the graph, or a negative seed, and nothing changes;
  // otherwise every result is stale until the kernels run again.
  absl::Status set_dropout_seed(std::string_view name, int64_t seed);
  // Fills every buffer a kernel writes with NaN bit patterns (0xFF bytes),
  // so that an element a kernel forgets to write shows up as NaN (outputs()
  // read right after it show the poison itself).
  absl::Status poison_outputs();
  // Runs kernel k (in plan order) and waits for it to finish.
  // FailedPrecondition before set_inputs() or before every kernel that
  // writes a tensor kernel k reads ran since then (it would read what they
  // wrote for other inputs, or nothing); OutOfRange for a k past the plan.
  // time_kernel and measure_kernel_bytes check the same.
  absl::Status run_kernel(size_t k);
  // Runs kernel k and returns how long it took, in microseconds: CUDA
  // events around the launch on a GPU, the steady clock on the CPU.
  absl::StatusOr<double> time_kernel(size_t k);
  // Runs kernel k once, from a flushed last-level cache, and returns the
  // bytes memory read plus wrote for it as the hardware counted them (on a
  // GPU: CUPTI's DRAM byte counters, runtime/dram_counters.h, with its
  // output still in L2 at the end counted as written). Unimplemented where
  // the backend reads no counters; otherwise the reason they could not be read.
  absl::StatusOr<double> measure_kernel_bytes(size_t k);
  // Runs every kernel in order.
  absl::Status run();
  // The graph outputs by name, copied back to the host. FailedPrecondition
  // (naming the kernel) unless every kernel ran since the last set_inputs():
  // its outputs would belong to other inputs, or to none.
  absl::StatusOr<TensorMap> outputs();
  // Working memory the kernels hold beyond the tensors' buffers (the CPU's
  // per-thread arrays, runtime/worker_scratch.h): taken at the first run
  // that needs it, kept for the next runs, freed with the plan.
  virtual int64_t working_memory_bytes() const { return 0; }

 private:
  virtual absl::Status do_set_inputs(const TensorMap& inputs) = 0;
  virtual absl::Status do_poison_outputs() = 0;
  virtual absl::Status do_run_kernel(size_t k) = 0;
  virtual absl::StatusOr<double> do_time_kernel(size_t k) = 0;
  virtual absl::StatusOr<double> do_measure_kernel_bytes(size_t k) = 0;
  virtual absl::StatusOr<TensorMap> do_outputs() = 0;
  // Raw copies of storage_bytes() bytes of graph input or output `id`.
  virtual absl::Status do_write_input(int32_t id, const void* data) = 0;
  virtual absl::Status do_read_output(int32_t id, void* data) = 0;
  // The kernels holding dropout node `id` take `seed` from now on.
  virtual absl::Status do_set_dropout_seed(int32_t id, uint64_t seed) = 0;

  // OK when kernel k exists, the inputs are set and the kernels writing
  // what k reads ran since; `what` names the call.
  absl::Status check_runnable(size_t k, std::string_view what);

  // Every kernel's results are stale (new inputs or seeds): each must run
  // again. `cause` names the call ("set_input(\"w\")"), for the errors.
  void forget_results(std::string cause);
  void mark_running(size_t k);
  void mark_ran(size_t k);

  // node id of a graph input or output named `name`, after checking `bytes`;
  // `what` names the call in the error.
  absl::StatusOr<int32_t> raw_tensor(std::string_view what, std::string_view name, bool input, size_t bytes) const;
  // Why a call cannot run yet: "before set_inputs()" and `none_given`, or,
  // when set_input() gave some inputs, the names of those still missing.
  std::string inputs_missing(std::string_view none_given) const;
  // FailedPrecondition unless every kernel ran since the inputs last changed.
  absl::Status check_results(std::string_view what) const;

  bool inputs_set_ = false;        // every input holds a value
  std::vector<bool> input_given_;  // per graph input (in graph.inputs() order), for set_input()
  std::vector<bool> ran_;  // per kernel: run (to the end) since the last set_inputs()
  // Per kernel: its buffers hold what it computed from the current inputs
  // (run since set_inputs() and since poison_outputs()).
  std::vector<bool> holds_results_;
  // The last call that made every result stale (ran_), and the last that
  // made every buffer stale (holds_results_: poison_outputs() too), named in
  // the errors of calls that came too early.
  std::string results_reset_by_, buffers_reset_by_;
  // Per kernel: (kernel, tensor id) for each tensor it reads that an earlier
  // kernel writes. Built at the first set_inputs().
  std::vector<std::vector<std::pair<size_t, int32_t>>> producers_;
};

// A copy of a fixed size, its buffers allocated and written once, timed as
// often as asked: `fusejit bench` times one beside each repetition of the
// plans, so that the ceiling and the kernels see the same moments of a
// machine whose bandwidth drifts.
class CopyTimer {
 public:
  virtual ~CopyTimer() = default;
  // Copies once and returns the microseconds it took.
  virtual absl::StatusOr<double> time_us() = 0;
};

// GB/s (1e9 bytes/s) of a copy of `bytes` bytes that took `us`: each byte is
// read once and written once. 0 for a time of 0.
inline double copy_gbps(int64_t bytes, double us) {
  return us > 0 ? 2.0 * static_cast<double>(bytes) / (us * 1e3) : 0.0;
}

class Backend {
 public:
  virtual ~Backend() = default;

  virtual std::string_view name() const = 0;   // "cpu" or "cuda"
  virtual std::string description() const = 0;  // "NVIDIA H200 (sm_90, 132 SMs)", "x86-64, 2 threads, g++ 12.2"
  // The device for the cost model: a datasheet GPU matched by name, else
  // one built from what the driver reports; for the CPU backend, this CPU
  // with the throughput of the backend's own JIT kernels (what `fusejit plan
  // --device cpu` and `fusejit bench` predict with; find_device("cpu") has
  // only the portable probe's). The CPU's first call on a machine measures
  // for a few seconds, saying so on stderr, and caches the figures in the
  // fusejit cache directory; later calls read them.
  virtual DeviceSpec device() const = 0;
  // How to fuse for this backend. The CPU's needs no measured figures, so
  // running a plan does not wait for the cost model's calibration.
  virtual FusionOptions fusion_options() const { return fusion_options_for(device()); }

  virtual absl::StatusOr<std::unique_ptr<LoadedPlan>> load(const FusionPlan& plan,
                                                           const LoadOptions& options = {}) = 0;

  // A copy of `bytes` bytes that measures the memory ceiling: device to
  // device on a GPU, a multi-threaded copy with streaming stores on the CPU.
  virtual absl::StatusOr<std::unique_ptr<CopyTimer>> prepare_copy(int64_t bytes) = 0;
  // The memory ceiling, measured now: bandwidth in GB/s (1e9 bytes/s, read
  // plus write bytes) of the best of 5 such copies after one more that warms up.
  absl::StatusOr<double> measure_copy_gbps(int64_t bytes);
  // Evicts the last-level cache (streams a buffer larger than it through
  // it), so that the next kernel reads its inputs from memory. On a GPU the
  // flush is queued before the next launch and not waited for, so that the
  // host's launch work overlaps it and stays out of time_kernel's interval.
  virtual absl::Status flush_cache() = 0;
  // What launching a kernel costs in this process, measured now, where
  // that differs from process to process (the CPU's thread pool hand-off);
  // nullopt where the device's figure stands (a GPU).
  virtual std::optional<double> measure_launch_us() { return std::nullopt; }
};

// "cpu", "cuda" (GPU 0), "cuda:N" (GPU N, numbered as the CUDA runtime
// numbers them, after CUDA_VISIBLE_DEVICES), or "auto" (cuda when a GPU is
// usable, else cpu). An unusable backend is an Unavailable status that says
// why ("no CUDA driver: ...", "no C++ compiler: ..."); a GPU number the
// machine lacks is NotFound, a name none of these InvalidArgument.
absl::StatusOr<std::unique_ptr<Backend>> make_backend(std::string_view name);
std::vector<std::string> backend_names();  // {"auto", "cpu", "cuda"}, and cuda:N
// The N of "cuda:N"; nullopt for any other name ("cuda:" with no number, a
// sign, a number past 9999).
std::optional<int> cuda_device_of(std::string_view name);

// Defined by each backend's file.
absl::StatusOr<std::unique_ptr<Backend>> make_cpu_backend();
absl::StatusOr<std::unique_ptr<Backend>> make_cuda_backend(int device = 0);

// Loads `plan`, runs it once on `inputs` and returns its outputs.
absl::StatusOr<TensorMap> run_plan(Backend& backend, const FusionPlan& plan, const TensorMap& inputs);
// The same for a plan already loaded (one loaded while showing progress).
absl::StatusOr<TensorMap> run_loaded(LoadedPlan& loaded, const TensorMap& inputs);

}  // namespace fusejit
