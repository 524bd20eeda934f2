# infonce_require(NAME DEB [find_package arguments...]): find_package(NAME ... QUIET), or stop
# the configure with one line naming what is missing and the apt command that installs it
# (what `pip install .` shows when the system lacks a -dev package). A macro, so that the
# variables find_package sets reach the caller.
macro(infonce_require infonce_require_name infonce_require_deb)
  find_package(${infonce_require_name} ${ARGN} QUIET)
  if(NOT ${infonce_require_name}_FOUND)
    # (a leading space: CMake prints the message as it is, without wrapping it)
    message(FATAL_ERROR " infonce-sim needs ${infonce_require_name} (Debian package "
                        "${infonce_require_deb}): sudo apt-get install ${infonce_require_deb}")
  endif()
endmacro()

# infonce_require_boost(VERSION COMPONENT...): each Boost component on its own first, so that
# the line names the one that is missing (libboost-<component>-dev).
macro(infonce_require_boost infonce_boost_version)
  foreach(infonce_boost_component ${ARGN})
    string(REPLACE "_" "-" infonce_boost_deb "libboost-${infonce_boost_component}-dev")
    infonce_require(Boost ${infonce_boost_deb} ${infonce_boost_version}
                    COMPONENTS ${infonce_boost_component})
  endforeach()
  find_package(Boost ${infonce_boost_version} REQUIRED COMPONENTS ${ARGN})
endmacro()
