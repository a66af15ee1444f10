# Locates what the project builds against. scripts/setup installs the Debian packages;
# CUDA and NCCL come from the toolkit in DH_CUDA_ROOT. Where they are not installed (a GPU
# image), scripts/gpu-validate points pkg-config and CMAKE_PREFIX_PATH at the copies that
# scripts/gpu-wheels carries in .whl/deps/.
find_package(Threads REQUIRED)
find_package(PkgConfig REQUIRED)
pkg_check_modules(JANSSON REQUIRED IMPORTED_TARGET jansson)
if(DH_BUILD_TESTS) # the unit tests' framework only
  pkg_check_modules(CMOCKA REQUIRED IMPORTED_TARGET cmocka)
endif()
pkg_check_modules(UNWIND REQUIRED IMPORTED_TARGET libunwind)
find_path(UTHASH_INCLUDE_DIR uthash.h REQUIRED)

# MPI is optional: a GPU image may lack it (scripts/gpu-validate builds there with the
# dependencies carried in .whl/deps/, which leave MPI out). Without it the programs that
# use MPI build against a one-process stand-in (tests/mpistub: MPI::MPI_C and an mpiexec
# that runs one process and skips, exit 77, for more), so that every target exists and
# the one-rank runs (the gpu label, scripts/gpu-validate) still work; the CTest entries
# whose checkers start several ranks are left out (DH_HAVE_MPI guards them).
find_package(MPI COMPONENTS C)
if(MPI_C_FOUND)
  set(DH_HAVE_MPI ON)
else()
  set(DH_HAVE_MPI OFF)
  set(MPIEXEC_EXECUTABLE "${PROJECT_SOURCE_DIR}/tests/mpistub/mpiexec")
  message(STATUS "MPI not found: MPI programs build against tests/mpistub (one process); left out: "
                 "the multi-rank CTest entries nccl.exact.np*, nccl.groups, nccl.pin, nccl.errors, "
                 "pairs.vgpu.*, si.* and workloads.* (but workloads.emulate_*); vgpu.scale, "
                 "vgpu.progress and vgpu.nccl.* (but single) stay and skip")
endif()

set(DH_CUDA_INCLUDE "${DH_CUDA_ROOT}/include")
foreach(h cuda_runtime_api.h cuda.h cublas_v2.h cublasLt.h)
  if(NOT EXISTS "${DH_CUDA_INCLUDE}/${h}")
    message(FATAL_ERROR "${DH_CUDA_INCLUDE}/${h} not found: set DH_CUDA_ROOT to a CUDA 13 toolkit")
  endif()
endforeach()
# NCCL: installed beside the toolkit here; on a GPU image it may come only with PyTorch's
# nvidia-nccl wheel (seen 2026-11-26: no nccl.h under /usr/local/cuda), which
# scripts/gpu-validate passes as DH_NCCL_ROOT (include/nccl.h, lib/libnccl.so).
set(DH_NCCL_ROOT "${DH_CUDA_ROOT}" CACHE PATH "NCCL's include/ and lib/ (default: DH_CUDA_ROOT)")
if(NOT EXISTS "${DH_NCCL_ROOT}/include/nccl.h")
  message(FATAL_ERROR "${DH_NCCL_ROOT}/include/nccl.h not found: set DH_NCCL_ROOT (or DH_CUDA_ROOT) to an NCCL 2.28 installation")
endif()

# The real libraries. Test programs link against these (never against the vgpu) so that
# they are what an unmodified binary is; scripts/vgpu-run puts the vgpu in front at run time.
foreach(lib cudart cublas cublasLt)
  find_library(DH_REAL_${lib} NAMES ${lib} PATHS "${DH_CUDA_ROOT}/lib64" "${DH_CUDA_ROOT}/lib" NO_DEFAULT_PATH REQUIRED)
endforeach()
find_library(DH_REAL_nccl NAMES nccl PATHS "${DH_NCCL_ROOT}/lib64" "${DH_NCCL_ROOT}/lib" NO_DEFAULT_PATH REQUIRED)
find_library(DH_REAL_cuda NAMES cuda PATHS "${DH_CUDA_ROOT}/lib64/stubs" "${DH_CUDA_ROOT}/lib/stubs" NO_DEFAULT_PATH REQUIRED)

add_library(dh::cuda_headers INTERFACE IMPORTED)
target_include_directories(dh::cuda_headers SYSTEM INTERFACE "${DH_CUDA_INCLUDE}" "${DH_NCCL_ROOT}/include")

# A program "linked against the real CUDA libraries", as a user's binary would be. Linked
# by name (-l) rather than by path so that no build RPATH points at the toolkit: at run
# time the vgpu (scripts/vgpu-run) or a real installation provides the libraries.
get_filename_component(_real_dir "${DH_REAL_cudart}" DIRECTORY)
get_filename_component(_stub_dir "${DH_REAL_cuda}" DIRECTORY)
get_filename_component(_nccl_dir "${DH_REAL_nccl}" DIRECTORY)
add_library(dh::real_cuda INTERFACE IMPORTED)
target_link_directories(dh::real_cuda INTERFACE "${_real_dir}" "${_stub_dir}" "${_nccl_dir}")
target_link_libraries(dh::real_cuda INTERFACE dh::cuda_headers -lcudart -lcuda -lcublas -lcublasLt -lnccl)
