# Installation, the exported CMake package and the Debian package.
#   cmake --install BUILD [--prefix P]   the CLI, headers under include/infonce_sim/<layer>/,
#                                        the static libraries, lib/cmake/infonce_sim/
#   find_package(infonce_sim CONFIG)     infonce_sim::base, ::loss, ::case, ::sim, ::step,
#                                        ::properties (+ ::sim_mpi, ::step_mpi with MPI)
#   cpack -G DEB (in BUILD)              infonce-sim_<version>_<arch>.deb (CLI) and
#                                        infonce-sim-dev_... (headers, libraries, package)
# Every library made by infonce_library() is installed and exported.
include(CMakePackageConfigHelpers)

get_property(infonce_libraries GLOBAL PROPERTY infonce_libraries)
set(infonce_cmake_dir ${CMAKE_INSTALL_LIBDIR}/cmake/infonce_sim)
install(TARGETS ${infonce_libraries} EXPORT infonce_simTargets
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT Development)
install(EXPORT infonce_simTargets NAMESPACE infonce_sim:: DESTINATION ${infonce_cmake_dir}
        COMPONENT Development)

# The config file finds what the exported targets link, and only that.
set(INFONCE_CONFIG_DEPENDENCIES [[
find_dependency(Eigen3 3.4 NO_MODULE)
find_dependency(Boost 1.74 COMPONENTS fiber context)
find_dependency(nlohmann_json 3)
find_dependency(rapidcheck)
find_dependency(Threads)]])
if(infonce_with_mpi)
  string(APPEND INFONCE_CONFIG_DEPENDENCIES "\nfind_dependency(MPI COMPONENTS CXX)")
endif()
if(infonce_allocator)
  string(APPEND INFONCE_CONFIG_DEPENDENCIES "\nfind_dependency(mimalloc CONFIG)")
endif()
configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/infonce_simConfig.cmake.in
                              ${PROJECT_BINARY_DIR}/infonce_simConfig.cmake
                              INSTALL_DESTINATION ${infonce_cmake_dir})
write_basic_package_version_file(${PROJECT_BINARY_DIR}/infonce_simConfigVersion.cmake
                                 COMPATIBILITY SameMajorVersion)
install(FILES ${PROJECT_BINARY_DIR}/infonce_simConfig.cmake
              ${PROJECT_BINARY_DIR}/infonce_simConfigVersion.cmake
        DESTINATION ${infonce_cmake_dir} COMPONENT Development)

# Debian packages: the runtime one's Depends come from dpkg-shlibdeps on the
# installed binary (Boost, mimalloc, OpenMPI, libstdc++, ...); the -dev one
# needs the headers of what the exported targets link.
set(CPACK_PACKAGE_NAME infonce-sim)
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY
    "Deterministic simulation and property tests of data-parallel InfoNCE gradients")
set(CPACK_PACKAGE_CONTACT "infonce-sim developers <infonce-sim@localhost>")
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_COMPONENTS_ALL Runtime Development)
set(CPACK_DEB_COMPONENT_INSTALL ON)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SECTION science)
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
set(CPACK_DEBIAN_RUNTIME_PACKAGE_NAME infonce-sim)
set(CPACK_DEBIAN_DEVELOPMENT_PACKAGE_NAME infonce-sim-dev)
set(infonce_dev_depends "infonce-sim (= ${PROJECT_VERSION}), libeigen3-dev, libboost-fiber-dev, "
                        "libboost-context-dev, nlohmann-json3-dev, librapidcheck-dev")
if(infonce_with_mpi)
  string(APPEND infonce_dev_depends ", libopenmpi-dev")
endif()
if(infonce_allocator)
  string(APPEND infonce_dev_depends ", libmimalloc-dev")
endif()
string(REPLACE ";" "" CPACK_DEBIAN_DEVELOPMENT_PACKAGE_DEPENDS "${infonce_dev_depends}")
include(CPack)
