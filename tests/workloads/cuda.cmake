# Device kernels for a real GPU: libwl_kernels_gpu.so next to the workload, loaded by it
# only when no vgpu is present (the vgpu's runtime has no fat-binary registration). The
# project's C warning flags and sanitizers are not nvcc's, so the target drops them.
if(NOT DH_WORKLOADS_CUDA)
  return()
endif()
include(CheckLanguage)
check_language(CUDA)
if(NOT CMAKE_CUDA_COMPILER)
  message(STATUS "workloads: no CUDA compiler, device kernels not built")
  return()
endif()
enable_language(CUDA)
# The device code's architectures (scripts/gpu-validate passes the local GPU's).
set(DH_CUDA_ARCHITECTURES 90 CACHE STRING "CUDA architectures of the device code built with nvcc")
add_library(wl_kernels_gpu SHARED ${CMAKE_CURRENT_SOURCE_DIR}/cuda/kernels.cu
            ${CMAKE_CURRENT_SOURCE_DIR}/cuda/emucomm.cu)
target_include_directories(wl_kernels_gpu PRIVATE ${CMAKE_CURRENT_SOURCE_DIR}/src)
set_target_properties(wl_kernels_gpu PROPERTIES CUDA_ARCHITECTURES "${DH_CUDA_ARCHITECTURES}" CUDA_RUNTIME_LIBRARY Shared
                      COMPILE_OPTIONS "" LINK_OPTIONS "" POSITION_INDEPENDENT_CODE ON
                      LIBRARY_OUTPUT_DIRECTORY ${CMAKE_CURRENT_BINARY_DIR})
add_dependencies(workload wl_kernels_gpu)
