# Install rules (LOOM_INSTALL): the public headers, the per-layer static libraries, the CMake
# package (find_package(Loom) -> Loom::loom) and loom.pc (pkg-config loom). Both describe the
# same link line: the layers from the top down, then oneDNN, OpenMP, zlib and protobuf-lite.
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

set(LOOM_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/Loom)
list(TRANSFORM LOOM_LAYERS PREPEND loom_ OUTPUT_VARIABLE LOOM_LAYER_TARGETS)

install(TARGETS loom ${LOOM_LAYER_TARGETS} EXPORT LoomTargets
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
        INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(DIRECTORY ${PROJECT_SOURCE_DIR}/loom/ DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/loom
        FILES_MATCHING PATTERN "*.h" PATTERN "*_test_util.h" EXCLUDE)

install(EXPORT LoomTargets NAMESPACE Loom:: DESTINATION ${LOOM_CMAKE_DIR})
configure_package_config_file(${CMAKE_CURRENT_LIST_DIR}/LoomConfig.cmake.in
                              ${PROJECT_BINARY_DIR}/LoomConfig.cmake
                              INSTALL_DESTINATION ${LOOM_CMAKE_DIR})
# 0.x releases promise nothing across minor versions.
write_basic_package_version_file(${PROJECT_BINARY_DIR}/LoomConfigVersion.cmake
                                 COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/LoomConfig.cmake ${PROJECT_BINARY_DIR}/LoomConfigVersion.cmake
              ${CMAKE_CURRENT_LIST_DIR}/FindDNNL.cmake
        DESTINATION ${LOOM_CMAKE_DIR})

# loom.pc finds its prefix from its own place (${pcfiledir}), so an install moved or made
# with `cmake --install --prefix DIR` after configuring stays right.
string(REGEX REPLACE "[^/]+" ".." LOOM_PC_PREFIX_FROM_PCFILEDIR
                     "${CMAKE_INSTALL_LIBDIR}/pkgconfig")
list(REVERSE LOOM_LAYER_TARGETS)  # each layer before the layers it uses
list(TRANSFORM LOOM_LAYER_TARGETS PREPEND -l OUTPUT_VARIABLE LOOM_PC_LAYER_LIBS)
list(JOIN LOOM_PC_LAYER_LIBS " " LOOM_PC_LAYER_LIBS)
get_filename_component(LOOM_PC_DNNL_DIR ${DNNL_LIBRARY} DIRECTORY)
configure_file(${CMAKE_CURRENT_LIST_DIR}/loom.pc.in ${PROJECT_BINARY_DIR}/loom.pc @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/loom.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
