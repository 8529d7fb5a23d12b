# FUSEJIT_STATIC_DEPS: binaries that run on a machine without our Debian
# libraries (the GPU machine lent by the `device` tool has the CUDA driver
# and toolkit, but no abseil or fmt). Debian's abseil package installs a
# static archive beside each shared library while its CMake package imports
# only the shared ones; this points every imported abseil library at its
# archive. fmt is used header-only and GoogleTest is static already, so the
# programs need nothing beyond glibc (with -static-libstdc++ -static-libgcc,
# which scripts/build-portable.sh adds).
get_directory_property(_fusejit_imported IMPORTED_TARGETS)
foreach(_target IN LISTS _fusejit_imported)
  if(NOT _target MATCHES "^absl::")
    continue()
  endif()
  get_target_property(_type ${_target} TYPE)
  if(NOT _type STREQUAL "SHARED_LIBRARY")
    continue()  # header-only parts of abseil are INTERFACE targets
  endif()
  get_target_property(_configs ${_target} IMPORTED_CONFIGURATIONS)
  foreach(_config IN LISTS _configs)
    get_target_property(_shared ${_target} IMPORTED_LOCATION_${_config})
    string(REGEX REPLACE "\\.so(\\.[0-9]+)*$" ".a" _archive "${_shared}")
    if(NOT EXISTS "${_archive}")
      message(FATAL_ERROR "FUSEJIT_STATIC_DEPS: ${_target} has no static archive beside ${_shared} "
                          "(expected ${_archive}); build without FUSEJIT_STATIC_DEPS")
    endif()
    set_target_properties(${_target} PROPERTIES
      IMPORTED_LOCATION_${_config} "${_archive}"
      IMPORTED_SONAME_${_config} ""
      IMPORTED_NO_SONAME TRUE)
  endforeach()
endforeach()
set(FUSEJIT_FMT_TARGET fmt::fmt-header-only)
# Added to the programs (not the library, whose unreferenced objects the
# linker would leave out): see the file.
set(FUSEJIT_PORTABLE_SOURCES ${CMAKE_CURRENT_LIST_DIR}/portable/arc4random.cpp)
