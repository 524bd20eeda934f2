# A layer that judges another must share no code with it: no file under DIR may include a
# project header outside ALLOWED. Run as
#   cmake -DDIR=<source>/oracle -DLAYER=oracle -DALLOWED="^(base|oracle)/"
#         -DSHOWN="base/, oracle/, Eigen and the standard library" -P check_includes.cmake
# A header is the project's when it is quoted or lies in one of its layers; it must match the
# regular expression ALLOWED. Fails (non-zero exit, one line per offending include) on a
# violation. Used by tests/oracle (oracle/) and tests/prediction (prediction/).
foreach(name DIR LAYER ALLOWED SHOWN)
  if(NOT DEFINED ${name} OR "${${name}}" STREQUAL "")
    message(FATAL_ERROR "check_includes: -D${name}= is required")
  endif()
endforeach()
if(NOT IS_DIRECTORY "${DIR}")
  message(FATAL_ERROR "check_includes: DIR='${DIR}' is not a directory")
endif()
file(GLOB_RECURSE files "${DIR}/*.hpp" "${DIR}/*.cpp" "${DIR}/*.h")
if(NOT files)
  message(FATAL_ERROR "check_includes: no sources under ${DIR}")
endif()
set(layers "^(base|loss|oracle|prediction|casefile|sim|step|sut|properties|cli)/")
set(violations 0)
foreach(file IN LISTS files)
  file(STRINGS "${file}" includes REGEX "^[ \t]*#[ \t]*include")
  foreach(line IN LISTS includes)
    string(REGEX MATCH "[\"<]([^\">]+)[\">]" _ "${line}")
    set(header "${CMAKE_MATCH_1}")
    if((line MATCHES "\"" OR header MATCHES "${layers}") AND NOT header MATCHES "${ALLOWED}")
      file(RELATIVE_PATH shown "${DIR}" "${file}")
      message("${LAYER} include check: ${shown} includes \"${header}\" (only ${SHOWN})")
      math(EXPR violations "${violations} + 1")
    endif()
  endforeach()
endforeach()
if(violations GREATER 0)
  message(FATAL_ERROR "${LAYER} include check: ${violations} forbidden include(s) under ${DIR}")
endif()
