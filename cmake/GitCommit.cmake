# INFONCE_GIT_COMMIT: the checkout's commit (12 hex digits) at configure time,
# empty when the source tree is not a git checkout or git is absent. The
# build reconfigures when HEAD moves, so the commit printed is not stale.
set(INFONCE_GIT_COMMIT "")
find_package(Git QUIET)
if(GIT_FOUND)
  # Only this project's own checkout, not a repository the tree sits inside.
  execute_process(COMMAND ${GIT_EXECUTABLE} rev-parse --show-toplevel
                  WORKING_DIRECTORY ${PROJECT_SOURCE_DIR}
                  OUTPUT_VARIABLE toplevel OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
  execute_process(COMMAND ${GIT_EXECUTABLE} rev-parse --short=12 HEAD
                  WORKING_DIRECTORY ${PROJECT_SOURCE_DIR}
                  OUTPUT_VARIABLE commit OUTPUT_STRIP_TRAILING_WHITESPACE
                  RESULT_VARIABLE status ERROR_QUIET)
  file(REAL_PATH "${PROJECT_SOURCE_DIR}" source_dir)
  if(toplevel)
    file(REAL_PATH "${toplevel}" toplevel)
  endif()
  if(status EQUAL 0 AND commit MATCHES "^[0-9a-f]+$" AND toplevel STREQUAL source_dir)
    set(INFONCE_GIT_COMMIT ${commit})
    # Reconfigure when HEAD, or the branch ref it points at, moves.
    execute_process(COMMAND ${GIT_EXECUTABLE} rev-parse --symbolic-full-name HEAD
                    WORKING_DIRECTORY ${PROJECT_SOURCE_DIR}
                    OUTPUT_VARIABLE branch OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
    foreach(ref HEAD ${branch})
      execute_process(COMMAND ${GIT_EXECUTABLE} rev-parse --path-format=absolute --git-path ${ref}
                      WORKING_DIRECTORY ${PROJECT_SOURCE_DIR}
                      OUTPUT_VARIABLE ref_file OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
      if(EXISTS "${ref_file}")
        set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS "${ref_file}")
      endif()
    endforeach()
  endif()
endif()
