# The man page and the bash completion, generated at build time by the
# infonce-sim just built (`help-man`, `help-completion`: cli/manual.cpp)
# from the option tables that --help prints, and installed beside it.
# Included from the top-level CMakeLists.txt once the infonce-sim target exists.
if(NOT TARGET infonce-sim OR CMAKE_CROSSCOMPILING)
  return()
endif()
include(GNUInstallDirs)
set(infonce_man_page ${PROJECT_BINARY_DIR}/infonce-sim.1)
set(infonce_completion ${PROJECT_BINARY_DIR}/infonce-sim.bash-completion)
add_custom_command(
  OUTPUT ${infonce_man_page} ${infonce_completion}
  COMMAND infonce-sim help-man ${infonce_man_page}
  COMMAND infonce-sim help-completion ${infonce_completion}
  DEPENDS infonce-sim
  COMMENT "Generating the infonce-sim man page and bash completion"
  VERBATIM)
add_custom_target(infonce-sim-manual ALL DEPENDS ${infonce_man_page} ${infonce_completion})
install(FILES ${infonce_man_page} DESTINATION ${CMAKE_INSTALL_MANDIR}/man1 COMPONENT Runtime)
install(FILES ${infonce_completion}
        DESTINATION ${CMAKE_INSTALL_DATADIR}/bash-completion/completions
        RENAME infonce-sim COMPONENT Runtime)
