// What the emulator's cuBLAS (cublas.cpp) shares with its driver (driver.cpp).
#pragma once

#include <mutex>
#include <string>

namespace fusejit::emulator {

// Held by every driver call that touches device memory.
std::mutex& driver_mutex();

// The first allocation whose guard band was written since the last check,
// described ("a write 1 bytes past the end of the allocation of ..."), or
// empty; every guard band is restored. Call with driver_mutex() held.
std::string check_and_restore_guards();

}  // namespace fusejit::emulator
