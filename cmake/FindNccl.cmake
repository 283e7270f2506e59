# Locate NCCL (>= 2.28.9, with the device API headers nccl_device.h).
# EPX_NCCL_HOME may point at a pip nvidia-nccl-cu13 tree (include/, lib/) or a CUDA install.
set(EPX_NCCL_HOME "" CACHE PATH "NCCL install prefix (include/nccl.h, lib/libnccl.so*)")
find_path(NCCL_INCLUDE_DIR nccl_device.h
  HINTS ${EPX_NCCL_HOME}/include $ENV{NCCL_HOME}/include ${CUDAToolkit_INCLUDE_DIRS} /usr/local/cuda/include)
find_library(NCCL_LIBRARY NAMES nccl libnccl.so.2
  HINTS ${EPX_NCCL_HOME}/lib $ENV{NCCL_HOME}/lib ${CUDAToolkit_LIBRARY_DIR} /usr/local/cuda/lib64)
if(NOT NCCL_INCLUDE_DIR OR NOT NCCL_LIBRARY)
  message(FATAL_ERROR "NCCL with device-API headers (nccl_device.h) not found; set EPX_NCCL_HOME")
endif()
file(STRINGS ${NCCL_INCLUDE_DIR}/nccl.h _v REGEX "#define NCCL_(MAJOR|MINOR|PATCH) ")
message(STATUS "NCCL: ${NCCL_INCLUDE_DIR} ${NCCL_LIBRARY} (${_v})")
add_library(epx::nccl UNKNOWN IMPORTED)
set_target_properties(epx::nccl PROPERTIES IMPORTED_LOCATION ${NCCL_LIBRARY}
  INTERFACE_INCLUDE_DIRECTORIES ${NCCL_INCLUDE_DIR})
