# The "gpu" label: the shim over the REAL CUDA runtime, driver, cuBLAS, cuBLASLt and NCCL on
# a real GPU, with no vgpu preloaded (tests/gpu/). Every entry runs under gpu_probe, which
# exits 77 (skipped) where there is no usable GPU (no driver, no device, or the vgpu in the
# process), so the label is safe everywhere; scripts/gpu-validate runs it with
# `ctest -L gpu` on a machine that has one.
#
# The vgpu test programs that register host kernels (the coverage program, nccl_prog) run
# unchanged with libdh_gpu_kreg.so in front (tests/gpu/kreg.c): it supplies their kernels
# as device code (tests/gpu/test_kernels.cu). Tests that need device code are registered
# only when nvcc is found (the same condition as tests/workloads/cuda.cmake).
set(_gpu_dir ${CMAKE_CURRENT_SOURCE_DIR}/gpu)
get_filename_component(_gpu_libdir "${DH_REAL_cudart}" DIRECTORY)

add_executable(gpu_probe ${_gpu_dir}/gpu_probe.c)
target_compile_definitions(gpu_probe PRIVATE DH_CUDA_LIBDIR="${_gpu_libdir}")
target_link_libraries(gpu_probe PRIVATE ${CMAKE_DL_LIBS})

# dh_gpu_test(NAME name COMMAND cmd... [MIN_DEVICES n] [TIMEOUT s] [ENV k=v...] [SERIAL]):
# gpu.<name>, label gpu, run by gpu_probe with the toolkit's libraries on the search path.
function(dh_gpu_test)
  cmake_parse_arguments(G "SERIAL" "NAME;TIMEOUT;MIN_DEVICES" "COMMAND;ENV" ${ARGN})
  if(NOT G_MIN_DEVICES)
    set(G_MIN_DEVICES 1)
  endif()
  if(NOT G_TIMEOUT)
    set(G_TIMEOUT 300)
  endif()
  dh_add_test(NAME gpu.${G_NAME}
    COMMAND $<TARGET_FILE:gpu_probe> --min-devices ${G_MIN_DEVICES} -- ${G_COMMAND}
    LABELS gpu TIMEOUT ${G_TIMEOUT} ENV "LD_LIBRARY_PATH=${_gpu_libdir}" ${G_ENV})
  if(G_SERIAL) # timing checks: nothing else on the GPU meanwhile
    set_tests_properties(gpu.${G_NAME} PROPERTIES RUN_SERIAL ON)
  endif()
endfunction()

# What the GPU is (device, compute capability, driver, runtime and NCCL versions).
dh_gpu_test(NAME probe COMMAND $<TARGET_FILE:gpu_probe> --json TIMEOUT 60)

# cuBLAS, cuBLASLt and copies: captured, replayed on the shim's own stream, handles and
# workspace, compared bit for bit with the direct call (tests/shim/test_op_*.c; the kernel
# variant needs vgpu-registered kernels and stays on the vgpu).
foreach(t blas lt copy)
  dh_gpu_test(NAME op_${t} COMMAND $<TARGET_FILE:shim_test_op_${t}> TIMEOUT 120)
endforeach()

# Two ranks on two devices of one process through the shim (stress): needs two GPUs.
dh_gpu_test(NAME nccl_single COMMAND $<TARGET_FILE:nccl_test_single> MIN_DEVICES 2 TIMEOUT 120
  ENV "LD_PRELOAD=$<TARGET_FILE:dhelix_shim>" "DHELIX_MODE=stress" "DHELIX_SEED=7")

if(DEFINED DH_WORKLOADS_CUDA AND NOT DH_WORKLOADS_CUDA)
  message(STATUS "gpu: DH_WORKLOADS_CUDA=OFF, the device-code tests of the gpu label are not registered")
  return()
endif()
include(CheckLanguage)
check_language(CUDA)
if(NOT CMAKE_CUDA_COMPILER)
  message(STATUS "gpu: no CUDA compiler, the device-code tests of the gpu label are not registered")
  return()
endif()
enable_language(CUDA)
set(DH_CUDA_ARCHITECTURES 90 CACHE STRING "CUDA architectures of the device code built with nvcc")

# The device code (nvcc takes neither the project's C warning flags nor its sanitizers, so
# the target drops them, as tests/workloads/cuda.cmake does), and the preloaded library.
add_library(dh_gpu_test_kernels SHARED ${_gpu_dir}/test_kernels.cu)
set_target_properties(dh_gpu_test_kernels PROPERTIES CUDA_ARCHITECTURES "${DH_CUDA_ARCHITECTURES}"
                      CUDA_RUNTIME_LIBRARY Shared COMPILE_OPTIONS "" LINK_OPTIONS ""
                      POSITION_INDEPENDENT_CODE ON)
add_library(dh_gpu_kreg SHARED ${_gpu_dir}/kreg.c)
target_include_directories(dh_gpu_kreg PRIVATE ${PROJECT_SOURCE_DIR}/tests/vgpu/include)
target_link_libraries(dh_gpu_kreg PRIVATE dh_gpu_test_kernels dh::cuda_headers Threads::Threads
                      ${CMAKE_DL_LIBS})

set(_kreg "$<TARGET_FILE:dh_gpu_kreg>")
set(_shim "$<TARGET_FILE:dhelix_shim>")

# The coverage program (tests/shim/coverage.c) on the real libraries: no shim (twice),
# passthrough, stress seeds, two strands, and its NCCL variant over one rank; every output
# bit-identical (tests/shim/test_coverage.c says what else it checks).
dh_gpu_test(NAME shim_coverage COMMAND $<TARGET_FILE:shim_test_coverage> TIMEOUT 600
  ENV "DH_TEST_COVERAGE=$<TARGET_FILE:shim_coverage>" "DH_TEST_SHIM=${_shim}"
      "DH_TEST_PRELOAD=${_kreg}:${_shim}" "DH_TEST_VGPU_PRELOAD=${_kreg}"
      "DH_TEST_LIBDIR=${_gpu_libdir}" "DH_COV_STRANDS_ENV=DHELIX_MODE=test-strands"
      "DH_COV_SEEDS=10" "DH_COV_STRAND_SEEDS=4")

# Every NCCL collective and point-to-point call over a single rank through the shim:
# passthrough, stress and two strands against the run without it (tests/nccl/test_exact.c).
dh_gpu_test(NAME nccl_exact COMMAND $<TARGET_FILE:nccl_test_exact> 1 TIMEOUT 300
  ENV "DH_TEST_PROG=$<TARGET_FILE:nccl_prog>" "DH_TEST_MPIEXEC=${MPIEXEC_EXECUTABLE}"
      "DH_TEST_PRELOAD=${_kreg}:${_shim}" "DH_TEST_VGPU_PRELOAD=${_kreg}"
      "DH_TEST_LIBDIR=${_gpu_libdir}")

# The emulated-communication kernel itself (tests/workloads/cuda/emucomm.cu).
add_executable(gpu_test_emu_kernel ${_gpu_dir}/test_emu_kernel.c)
target_include_directories(gpu_test_emu_kernel PRIVATE ${PROJECT_SOURCE_DIR}/tests/workloads/src)
target_link_libraries(gpu_test_emu_kernel PRIVATE dh::real_cuda ${CMAKE_DL_LIBS})
add_dependencies(gpu_test_emu_kernel wl_kernels_gpu)
dh_gpu_test(NAME emu_kernel COMMAND $<TARGET_FILE:gpu_test_emu_kernel> $<TARGET_FILE:wl_kernels_gpu>
  TIMEOUT 120 SERIAL)

# The Megatron-shaped workload on the GPU with emulated communication, with and without the
# shim, and profile -> plan -> SI over it (tests/workloads/test/wl_emu_check.c).
dh_gpu_test(NAME workload_emulate
  COMMAND $<TARGET_FILE:wl_emu_check> gpu emulate $<TARGET_FILE:workload> ${_shim} TIMEOUT 600 SERIAL)
dh_gpu_test(NAME workload_plan
  COMMAND $<TARGET_FILE:wl_emu_check> gpu plan $<TARGET_FILE:workload> ${_shim} $<TARGET_FILE:dhelix>
  TIMEOUT 600 SERIAL)
