# The oracle must share no code with what it judges: no file under DIR may
# include a header of loss/, step/, sim/ or casefile/ (or of any layer but
# base/ and oracle/ itself). Run as
#   cmake -DDIR=<source>/oracle -P check_includes.cmake
# and fails (non-zero exit, one line per offending include) on a violation.
if(NOT DIR OR NOT IS_DIRECTORY "${DIR}")
  message(FATAL_ERROR "check_includes: DIR='${DIR}' is not a directory")
endif()
file(GLOB_RECURSE files "${DIR}/*.hpp" "${DIR}/*.cpp" "${DIR}/*.h")
if(NOT files)
  message(FATAL_ERROR "check_includes: no sources under ${DIR}")
endif()
set(violations 0)
foreach(file IN LISTS files)
  file(STRINGS "${file}" includes REGEX "^[ \t]*#[ \t]*include")
  foreach(line IN LISTS includes)
    string(REGEX MATCH "[\"<]([^\">]+)[\">]" _ "${line}")
    set(header "${CMAKE_MATCH_1}")
    set(bad FALSE)
    if(header MATCHES "^(loss|step|sim|casefile)/")
      set(bad TRUE)
    elseif(line MATCHES "\"" AND NOT header MATCHES "^(base|oracle)/")
      set(bad TRUE)  # a project header from outside base/ and oracle/
    endif()
    if(bad)
      file(RELATIVE_PATH shown "${DIR}" "${file}")
      message("oracle include check: ${shown} includes \"${header}\" (only base/, oracle/, Eigen and the standard library)")
      math(EXPR violations "${violations} + 1")
    endif()
  endforeach()
endforeach()
if(violations GREATER 0)
  message(FATAL_ERROR "oracle include check: ${violations} forbidden include(s) under ${DIR}")
endif()
