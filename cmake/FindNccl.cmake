# Locates NCCL once for the whole tree: headers (nccl.h, nccl_device.h) and libnccl from the same
# place. EPX_NCCL_HOME (a prefix with include/ and lib/: an NCCL install, a CUDA install, or the
# nvidia/nccl folder of a pip nvidia-nccl-cu13 wheel) is searched alone when set; else $NCCL_HOME;
# else CUDA's folders (/usr/local/cuda). Supported: NCCL 2.28.9, and 2.30.0 or newer of NCCL 2
# (the device-API ABI that carries a magic and version; README, "NCCL versions").
#
# Sets NCCL_INCLUDE_DIR, NCCL_LIBRARY, EPX_NCCL_VERSION_CODE (e.g. 22809, 23203) and
# EPX_NCCL_VERSION ("2.32.3"); NCCL_FOUND is false when headers or library are missing (the
# plugin then is not built; libepx stops the configuration). epx_nccl_target() (after CUDA is
# enabled) creates epx::nccl with EPX_NCCL_DEVCOMM_BYTES measured from the headers.
set(EPX_NCCL_HOME "" CACHE PATH "NCCL prefix (include/nccl.h, lib/libnccl.so*); else \$NCCL_HOME, else CUDA's")
find_package(CUDAToolkit QUIET)

if(EPX_NCCL_HOME)
  set(_epx_nccl_from "${EPX_NCCL_HOME}")
  set(_epx_nccl_how "EPX_NCCL_HOME")
elseif(DEFINED ENV{NCCL_HOME} AND NOT "$ENV{NCCL_HOME}" STREQUAL "")
  set(_epx_nccl_from "$ENV{NCCL_HOME}")
  set(_epx_nccl_how "NCCL_HOME")
else()
  set(_epx_nccl_from "")
  set(_epx_nccl_how "CUDA toolkit")
endif()
# A different prefix than the cached one: search again (headers and library never mix two places).
if(NOT "${_epx_nccl_from}" STREQUAL "${_EPX_NCCL_SEARCHED_IN}")
  unset(NCCL_INCLUDE_DIR CACHE)
  unset(NCCL_LIBRARY CACHE)
  set(_EPX_NCCL_SEARCHED_IN "${_epx_nccl_from}" CACHE INTERNAL "prefix NCCL_INCLUDE_DIR/NCCL_LIBRARY were found in")
endif()
if(_epx_nccl_from)
  find_path(NCCL_INCLUDE_DIR nccl.h PATHS ${_epx_nccl_from} PATH_SUFFIXES include NO_DEFAULT_PATH)
  find_library(NCCL_LIBRARY NAMES nccl libnccl.so.2 PATHS ${_epx_nccl_from} PATH_SUFFIXES lib lib64 NO_DEFAULT_PATH)
else()
  find_path(NCCL_INCLUDE_DIR nccl.h HINTS ${CUDAToolkit_INCLUDE_DIRS} /usr/local/cuda/include)
  find_library(NCCL_LIBRARY NAMES nccl libnccl.so.2 HINTS ${CUDAToolkit_LIBRARY_DIR} /usr/local/cuda/lib64)
endif()

set(NCCL_FOUND FALSE)
set(EPX_NCCL_VERSION_CODE 0)
set(EPX_NCCL_VERSION "")
if(NCCL_INCLUDE_DIR AND NCCL_LIBRARY AND EXISTS ${NCCL_INCLUDE_DIR}/nccl_device.h)
  file(STRINGS ${NCCL_INCLUDE_DIR}/nccl.h _epx_nccl_code REGEX "#define NCCL_VERSION_CODE ")
  string(REGEX REPLACE ".*NCCL_VERSION_CODE +([0-9]+).*" "\\1" EPX_NCCL_VERSION_CODE "${_epx_nccl_code}")
  math(EXPR _maj "${EPX_NCCL_VERSION_CODE} / 10000")
  math(EXPR _min "(${EPX_NCCL_VERSION_CODE} / 100) % 100")
  math(EXPR _pat "${EPX_NCCL_VERSION_CODE} % 100")
  set(EPX_NCCL_VERSION "${_maj}.${_min}.${_pat}")
  set(NCCL_FOUND TRUE)
  message(STATUS "NCCL ${EPX_NCCL_VERSION} (from ${_epx_nccl_how}): headers ${NCCL_INCLUDE_DIR}, library ${NCCL_LIBRARY}")
  # The same rule as epx::ncclVersionSupportedForBuild (host/src/core/nccl_version.cc).
  if(NOT (EPX_NCCL_VERSION_CODE EQUAL 22809 OR (EPX_NCCL_VERSION_CODE GREATER_EQUAL 23000 AND _maj EQUAL 2)))
    set(_epx_nccl_unsupported "NCCL ${EPX_NCCL_VERSION} (${NCCL_INCLUDE_DIR}) is not supported: epx builds against "
        "NCCL 2.28.9 or NCCL 2.30.0 and newer (2.x). Set EPX_NCCL_HOME to such an NCCL (scripts/install-deps.sh --nccl 2.32.3 "
        "installs the pip wheel into a prefix).")
  endif()
else()
  message(STATUS "NCCL with device-API headers (nccl_device.h) and libnccl not found in the ${_epx_nccl_how} folders "
          "(${_epx_nccl_from}); set EPX_NCCL_HOME")
endif()

# epx::nccl: headers and library of the NCCL found above, with EPX_NCCL_DEVCOMM_BYTES (the room
# for ncclDevComm in the kernels' arguments, device/include/epx/device/ep_args.h) measured from
# its headers. Needs CUDA enabled.
function(epx_nccl_target)
  if(NOT NCCL_FOUND)
    message(FATAL_ERROR "libepx needs NCCL with device-API headers (nccl_device.h) and libnccl; set EPX_NCCL_HOME")
  endif()
  if(_epx_nccl_unsupported)
    message(FATAL_ERROR ${_epx_nccl_unsupported})
  endif()
  if(NOT DEFINED EPX_NCCL_DEVCOMM_BYTES_${EPX_NCCL_VERSION_CODE})
    # sizeof(ncclDevComm) as digits in a string of the object file, read back without running it.
    set(_dir ${CMAKE_BINARY_DIR}/CMakeFiles/epx-nccl-devcomm)
    file(WRITE ${_dir}/devcomm_size.cu
      "#include <nccl_device.h>\n"
      "#define D(n) char('0' + int((sizeof(ncclDevComm) / (n)) % 10))\n"
      "#define A(n) char('0' + int((alignof(ncclDevComm) / (n)) % 10))\n"
      "extern \"C\" const char epx_devcomm_info[] = {'E','P','X','_','D','E','V','C','O','M','M','[',\n"
      "  D(1000), D(100), D(10), D(1), ',', A(100), A(10), A(1), ']', 0};\n")
    execute_process(COMMAND ${CMAKE_CUDA_COMPILER} -c -std=c++17 -I${NCCL_INCLUDE_DIR} ${_dir}/devcomm_size.cu
                            -o ${_dir}/devcomm_size.o
      RESULT_VARIABLE _rc OUTPUT_VARIABLE _out ERROR_VARIABLE _out)
    if(NOT _rc EQUAL 0)
      message(FATAL_ERROR "cannot compile nccl_device.h of ${NCCL_INCLUDE_DIR} with ${CMAKE_CUDA_COMPILER}:\n${_out}")
    endif()
    file(STRINGS ${_dir}/devcomm_size.o _info REGEX "EPX_DEVCOMM\\[[0-9]+,[0-9]+\\]")
    if(NOT _info MATCHES "EPX_DEVCOMM\\[([0-9]+),([0-9]+)\\]")
      message(FATAL_ERROR "cannot read sizeof(ncclDevComm) from ${_dir}/devcomm_size.o")
    endif()
    math(EXPR _bytes "${CMAKE_MATCH_1}")
    math(EXPR _align "${CMAKE_MATCH_2}")
    if(_align GREATER 16)
      message(FATAL_ERROR "ncclDevComm of NCCL ${EPX_NCCL_VERSION} wants ${_align}-byte alignment; epx reserves 16")
    endif()
    math(EXPR _room "(${_bytes} + 15) / 16 * 16")
    set(EPX_NCCL_DEVCOMM_BYTES_${EPX_NCCL_VERSION_CODE} ${_room} CACHE INTERNAL "room for ncclDevComm, NCCL ${EPX_NCCL_VERSION}")
    message(STATUS "NCCL ${EPX_NCCL_VERSION}: sizeof(ncclDevComm) = ${_bytes}, the kernels' arguments reserve ${_room} bytes")
  endif()
  add_library(epx::nccl UNKNOWN IMPORTED GLOBAL)
  # Not a system include: NCCL's headers come before CUDA's folders (which may hold another nccl.h).
  set_target_properties(epx::nccl PROPERTIES IMPORTED_LOCATION ${NCCL_LIBRARY} IMPORTED_NO_SYSTEM TRUE
    INTERFACE_INCLUDE_DIRECTORIES ${NCCL_INCLUDE_DIR}
    INTERFACE_COMPILE_DEFINITIONS "EPX_NCCL_DEVCOMM_BYTES=${EPX_NCCL_DEVCOMM_BYTES_${EPX_NCCL_VERSION_CODE}};EPX_NCCL_BUILD_VERSION_CODE=${EPX_NCCL_VERSION_CODE}")
endfunction()
