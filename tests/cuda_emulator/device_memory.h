// The emulated device's memory, shared by the emulator's driver (driver.cpp)
// and cuBLAS (cublas.cpp).
//
// Each allocation is its own mapping: an inaccessible page, a band of known
// bytes, the data, a band of known bytes up to the next multiple of 256
// (cuMemAlloc's granularity), an inaccessible page. The data starts as
// 0xFF bytes (NaN in every float type). A kernel or GEMM run through
// run_watched() that reads or writes an inaccessible page, or writes a
// band, is reported as an illegal address. Not caught: a read inside a band
// (a GPU does not fault there either, it returns whatever is there) and an
// access that lands in no allocation's pages at all.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>

namespace fusejit::emulator {

// Held by every driver call that touches device memory; the functions below
// expect it held.
std::mutex& driver_mutex();

// The context current on the calling thread (the top of its stack, kept
// by driver.cpp), or null. Memory, modules, events and cuBLAS handles
// belong to the context current when they were made, and the emulator
// uses them only while it is current: on a GPU another context's are
// another device's, or gone with it.
const void* current_context();

// A new allocation of `bytes` (> 0), 256-byte aligned, owned by `context`,
// or 0 when the host refuses the mapping.
uintptr_t allocate(size_t bytes, const void* context);
// Unmaps an allocation made by allocate(); false if `data` is not one.
bool release(uintptr_t data);
// The bytes allocated and not released.
size_t allocated_bytes();
// Whether [ptr, ptr + bytes) lies inside one allocation.
bool inside_one_allocation(uintptr_t ptr, size_t bytes);
// The context owning the allocation that holds `ptr`, or null where none does.
const void* owner_of(uintptr_t ptr);
// Unmaps every allocation `context` owns (the context was reset).
void release_all_of(const void* context);

// Runs `body` (a kernel launch, a GEMM) with bad accesses watched. Returns
// the first one described ("a read 4 bytes past the end of the allocation
// of 1024 bytes at 0x..."), or empty. The bands are restored and the pages
// made inaccessible again afterwards, so the next run blames only its own.
std::string run_watched(const std::function<void()>& body);

}  // namespace fusejit::emulator
