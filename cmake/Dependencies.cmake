# Locates what the project builds against. scripts/setup installs the Debian packages;
# CUDA and NCCL come from the toolkit in DH_CUDA_ROOT.
find_package(Threads REQUIRED)
find_package(PkgConfig REQUIRED)
pkg_check_modules(JANSSON REQUIRED IMPORTED_TARGET jansson)
pkg_check_modules(CMOCKA REQUIRED IMPORTED_TARGET cmocka)
pkg_check_modules(UNWIND REQUIRED IMPORTED_TARGET libunwind)
find_package(MPI REQUIRED COMPONENTS C)
find_path(UTHASH_INCLUDE_DIR uthash.h REQUIRED)

set(DH_CUDA_INCLUDE "${DH_CUDA_ROOT}/include")
foreach(h cuda_runtime_api.h cuda.h cublas_v2.h cublasLt.h nccl.h)
  if(NOT EXISTS "${DH_CUDA_INCLUDE}/${h}")
    message(FATAL_ERROR "${DH_CUDA_INCLUDE}/${h} not found: set DH_CUDA_ROOT to a CUDA 13 toolkit with NCCL")
  endif()
endforeach()

# The real libraries. Test programs link against these (never against the vgpu) so that
# they are what an unmodified binary is; scripts/vgpu-run puts the vgpu in front at run time.
foreach(lib cudart cublas cublasLt nccl)
  find_library(DH_REAL_${lib} NAMES ${lib} PATHS "${DH_CUDA_ROOT}/lib64" "${DH_CUDA_ROOT}/lib" NO_DEFAULT_PATH REQUIRED)
endforeach()
find_library(DH_REAL_cuda NAMES cuda PATHS "${DH_CUDA_ROOT}/lib64/stubs" "${DH_CUDA_ROOT}/lib/stubs" NO_DEFAULT_PATH REQUIRED)

add_library(dh::cuda_headers INTERFACE IMPORTED)
target_include_directories(dh::cuda_headers SYSTEM INTERFACE "${DH_CUDA_INCLUDE}")

# A program "linked against the real CUDA libraries", as a user's binary would be. Linked
# by name (-l) rather than by path so that no build RPATH points at the toolkit: at run
# time the vgpu (scripts/vgpu-run) or a real installation provides the libraries.
get_filename_component(_real_dir "${DH_REAL_cudart}" DIRECTORY)
get_filename_component(_stub_dir "${DH_REAL_cuda}" DIRECTORY)
add_library(dh::real_cuda INTERFACE IMPORTED)
target_link_directories(dh::real_cuda INTERFACE "${_real_dir}" "${_stub_dir}")
target_link_libraries(dh::real_cuda INTERFACE dh::cuda_headers -lcudart -lcuda -lcublas -lcublasLt -lnccl)
