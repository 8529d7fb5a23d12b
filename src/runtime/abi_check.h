// Compile-time comparison of our declarations of a C library's ABI with the
// library's own header (see cuda_driver_abi.cpp, nvrtc_library.cpp): an
// enum of the header matches a 32-bit int of ours, which the platform passes
// and returns the same way; everything else must be the very same type.
#pragma once

#include <type_traits>

namespace fusejit::abi_check {

template <typename T>
struct Abi {
  using type = T;
};
template <typename T>
requires std::is_enum_v<T>
struct Abi<T> {
  using type = std::make_signed_t<std::underlying_type_t<T>>;
};
template <typename T>
struct Abi<T*> {
  using type = typename Abi<T>::type*;
};
template <typename T>
struct Abi<const T*> {
  using type = const typename Abi<T>::type*;
};
template <typename R, typename... Args>
struct Abi<R (*)(Args...)> {
  using type = typename Abi<R>::type (*)(typename Abi<Args>::type...);
};

template <typename A, typename B>
inline constexpr bool kSameAbi = std::is_same_v<typename Abi<A>::type, typename Abi<B>::type>;

}  // namespace fusejit::abi_check
