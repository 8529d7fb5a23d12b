# fusejit_public_headers(ROOT HEADER OUT): OUT is HEADER and every file under
# ROOT it includes with #include "...", directly or not, as paths relative to
# ROOT. Includes of files not under ROOT (generated ones such as
# fusejit_version.h, installed on their own) are skipped. Every listed file
# is a configure dependency, so an edit that adds an include re-runs it.
function(fusejit_public_headers root header out)
  set(done "")
  set(todo ${header})
  while(todo)
    list(POP_FRONT todo current)
    if(current IN_LIST done OR NOT EXISTS "${root}/${current}")
      continue()
    endif()
    list(APPEND done ${current})
    set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS "${root}/${current}")
    file(STRINGS "${root}/${current}" lines REGEX "^#include \"[^\"]+\"")
    foreach(line IN LISTS lines)
      string(REGEX REPLACE "^#include \"([^\"]+)\".*" "\\1" included "${line}")
      list(APPEND todo ${included})
    endforeach()
  endwhile()
  list(SORT done)
  set(${out} ${done} PARENT_SCOPE)
endfunction()
