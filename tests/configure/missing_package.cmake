# Configures the project with one required package hidden (-DHIDE=<find_package name>) and
# checks that the configure fails with the one line naming the Debian package (-DDEB=...) and
# its apt command: what `pip install .` shows on a system that lacks it.
set(build_dir ${BINARY_DIR}/missing-${HIDE})
file(REMOVE_RECURSE ${build_dir})
execute_process(
  COMMAND ${CMAKE_COMMAND} -S ${SOURCE_DIR} -B ${build_dir} -G Ninja -DBUILD_TESTING=OFF
          -DINFONCE_BENCH=OFF -DINFONCE_MPI=OFF -DCMAKE_DISABLE_FIND_PACKAGE_${HIDE}=ON
  RESULT_VARIABLE result OUTPUT_VARIABLE output ERROR_VARIABLE output)
file(REMOVE_RECURSE ${build_dir})
if(result EQUAL 0)
  message(FATAL_ERROR "the configure succeeded without ${HIDE}")
endif()
set(line "infonce-sim needs ${HIDE} (Debian package ${DEB}): sudo apt-get install ${DEB}")
string(FIND "${output}" "\n   ${line}\n" at)
if(at EQUAL -1)
  message(FATAL_ERROR "expected the line\n  ${line}\nin the configure's output:\n${output}")
endif()
message(STATUS "one line: ${line}")
