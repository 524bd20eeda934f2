# The strategy predictions must share no code with the rank program they
# judge (issue 30): no file under DIR may include a project header other than
# base/, prediction/ itself and casefile/strategy_value.hpp (the strategy's
# value types, no functions). Run as
#   cmake -DDIR=<source>/prediction -P check_includes.cmake
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
    if(header MATCHES "^(loss|step|sim|oracle|properties|sut|cli)/")
      set(bad TRUE)
    elseif(header MATCHES "^casefile/" AND NOT header STREQUAL "casefile/strategy_value.hpp")
      set(bad TRUE)
    elseif(line MATCHES "\"" AND NOT header MATCHES "^(base|prediction)/"
           AND NOT header STREQUAL "casefile/strategy_value.hpp")
      set(bad TRUE)  # any other project header
    endif()
    if(bad)
      file(RELATIVE_PATH shown "${DIR}" "${file}")
      message("prediction include check: ${shown} includes \"${header}\" (only base/, prediction/, casefile/strategy_value.hpp and the standard library)")
      math(EXPR violations "${violations} + 1")
    endif()
  endforeach()
endforeach()
if(violations GREATER 0)
  message(FATAL_ERROR "prediction include check: ${violations} forbidden include(s) under ${DIR}")
endif()
