// Linked into the portable binaries (FUSEJIT_STATIC_DEPS) only.
//
// GCC 12's static libstdc++ draws std::random_device's numbers from
// arc4random, which glibc added in 2.36 (Debian 12's). Defined here, the
// binaries bind no glibc symbol newer than 2.35 (the static libgcc's
// _dl_find_object), so they also start on Ubuntu 22.04, whose glibc is
// 2.35; the GPU machine's system is not known in advance. Same source of
// randomness as glibc's: the kernel's getrandom().
#include <sys/random.h>

#include <cerrno>
#include <cstdint>

extern "C" uint32_t arc4random(void) {
  uint32_t value = 0;
  size_t got = 0;
  while (got < sizeof value) {
    const ssize_t n = getrandom(reinterpret_cast<char*>(&value) + got, sizeof value - got, 0);
    if (n > 0) got += static_cast<size_t>(n);
    // n < 0: EINTR (a signal arrived) is retried; before the kernel's pool
    // is ready getrandom blocks rather than fails.
  }
  return value;
}
