# Writes OUT (a C++ fragment: #define SRU_GIT_COMMIT "...") with the source tree's commit, "+dirty" when
# tracked files differ from it, or "unknown" outside a git checkout; run at every build (cmake -P), and
# the file is rewritten only when the text changes, so an unchanged commit recompiles nothing.
execute_process(COMMAND git rev-parse --short HEAD WORKING_DIRECTORY "${SRC}"
                OUTPUT_VARIABLE commit OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET RESULT_VARIABLE rc)
if(NOT rc EQUAL 0 OR commit STREQUAL "")
  set(commit "unknown")
else()
  execute_process(COMMAND git diff --quiet HEAD -- WORKING_DIRECTORY "${SRC}" RESULT_VARIABLE dirty ERROR_QUIET)
  if(NOT dirty EQUAL 0)
    set(commit "${commit}+dirty")
  endif()
endif()
set(text "#define SRU_GIT_COMMIT \"${commit}\"\n")
if(EXISTS "${OUT}")
  file(READ "${OUT}" old)
endif()
if(NOT "${old}" STREQUAL "${text}")
  file(WRITE "${OUT}" "${text}")
endif()
