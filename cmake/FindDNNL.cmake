# Finds oneDNN and defines the imported target DNNL::dnnl, the name oneDNN's own package
# (dnnl-config.cmake) gives it. Debian's dnnl-config.cmake cannot be used: it requires OpenCL
# (Debian builds oneDNN with the OpenCL GPU runtime) although Loom only runs its CPU engine.
# Installed beside LoomConfig.cmake, so projects using an installed Loom find oneDNN the same
# way. Sets DNNL_FOUND, DNNL_LIBRARY and DNNL_INCLUDE_DIR.
if(TARGET DNNL::dnnl)
  # Already defined, by oneDNN's own package or an earlier call.
  set(DNNL_FOUND TRUE)
  return()
endif()

find_library(DNNL_LIBRARY NAMES dnnl)
find_path(DNNL_INCLUDE_DIR NAMES oneapi/dnnl/dnnl.hpp)
include(FindPackageHandleStandardArgs)
find_package_handle_standard_args(DNNL REQUIRED_VARS DNNL_LIBRARY DNNL_INCLUDE_DIR)

if(DNNL_FOUND)
  add_library(DNNL::dnnl UNKNOWN IMPORTED)
  set_target_properties(DNNL::dnnl PROPERTIES IMPORTED_LOCATION "${DNNL_LIBRARY}"
                                              INTERFACE_INCLUDE_DIRECTORIES "${DNNL_INCLUDE_DIR}")
endif()
