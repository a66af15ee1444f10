# NCCL interception (nccl_wrap/, label "nccl"): one CTest entry per test file (the exactness
# driver once per world size). nccl_prog is the MPI program under test (tests/nccl/prog*.c);
# the drivers run it under mpirun on the vgpu with and without the shim and compare what
# it prints. The whole label takes well under three minutes on two cores.
set(_nccl_dir ${CMAKE_CURRENT_SOURCE_DIR}/nccl)

add_executable(nccl_prog ${_nccl_dir}/prog_common.c ${_nccl_dir}/prog_exact.c
               ${_nccl_dir}/prog_groups.c ${_nccl_dir}/prog_errors.c ${_nccl_dir}/prog_order.c)
target_include_directories(nccl_prog PRIVATE ${PROJECT_SOURCE_DIR}/tests/vgpu/include)
target_link_libraries(nccl_prog PRIVATE dh::real_cuda MPI::MPI_C Threads::Threads
                      ${CMAKE_DL_LIBS})

# Unit tests of the pure parts: layouts, roles, DHELIX_GROUPS.
add_executable(nccl_test_roles ${_nccl_dir}/test_roles.c)
target_link_libraries(nccl_test_roles PRIVATE dh_sched dh::common PkgConfig::CMOCKA)
dh_add_test(NAME nccl.roles COMMAND nccl_test_roles LABELS nccl asan tsan TIMEOUT 30)

# The drivers.
foreach(t exact groups pin errors order)
  add_executable(nccl_test_${t} ${_nccl_dir}/test_${t}.c ${_nccl_dir}/drive.c
                 ${CMAKE_CURRENT_SOURCE_DIR}/shim/runner.c)
  target_include_directories(nccl_test_${t} PRIVATE ${_nccl_dir} ${CMAKE_CURRENT_SOURCE_DIR}/shim)
  target_link_libraries(nccl_test_${t} PRIVATE PkgConfig::CMOCKA PkgConfig::JANSSON)
  add_dependencies(nccl_test_${t} nccl_prog dhelix_shim vgpu_all)
endforeach()

set(_nccl_pre "$<TARGET_FILE:dhelix_shim>")
set(_nccl_vgpu "")
if(DH_SANITIZER_PRELOAD)
  set(_nccl_pre "${DH_SANITIZER_PRELOAD}:${_nccl_pre}")
  set(_nccl_vgpu "${DH_SANITIZER_PRELOAD}:")
endif()
list(JOIN VGPU_PRELOAD_LIBS ":" _nccl_libs)
set(_nccl_env
    "DH_TEST_PROG=$<TARGET_FILE:nccl_prog>"
    "DH_TEST_MPIEXEC=${MPIEXEC_EXECUTABLE}"
    "DH_TEST_PRELOAD=${_nccl_pre}:${_nccl_libs}"
    "DH_TEST_VGPU_PRELOAD=${_nccl_vgpu}${_nccl_libs}"
    "DH_TEST_LIBDIR=${VGPU_LIBDIR}"
    "VGPU_COMM_TIMEOUT=20")

if(DH_HAVE_MPI) # several ranks under mpiexec (cmake/Dependencies.cmake)
  foreach(np 2 4 8)
    dh_add_test(NAME nccl.exact.np${np} COMMAND nccl_test_exact ${np} LABELS nccl TIMEOUT 120
                ENV ${_nccl_env})
  endforeach()
  dh_add_test(NAME nccl.groups COMMAND nccl_test_groups LABELS nccl TIMEOUT 120 ENV ${_nccl_env})
  dh_add_test(NAME nccl.pin COMMAND nccl_test_pin LABELS nccl TIMEOUT 120 ENV ${_nccl_env})
  dh_add_test(NAME nccl.errors COMMAND nccl_test_errors LABELS nccl TIMEOUT 120 ENV ${_nccl_env})
  # The order rule broken (DHELIX_TEST_BREAK=nccl_order): the vgpu reports the deadlock.
  dh_add_test(NAME nccl.order COMMAND nccl_test_order LABELS nccl TIMEOUT 200 ENV ${_nccl_env})
endif()

# One process, two ranks on two devices, two threads, the shim deferring (stress): fast
# enough for the sanitizer builds.
add_executable(nccl_test_single ${_nccl_dir}/test_single.c)
target_link_libraries(nccl_test_single PRIVATE dh::real_cuda PkgConfig::CMOCKA Threads::Threads
                      ${CMAKE_DL_LIBS})
add_dependencies(nccl_test_single dhelix_shim vgpu_all)
dh_add_test(NAME nccl.single COMMAND nccl_test_single LABELS nccl asan tsan TIMEOUT 60
  ENV "LD_PRELOAD=${_nccl_pre}:${_nccl_libs}" "LD_LIBRARY_PATH=${VGPU_LIBDIR}"
      "DHELIX_MODE=stress" "DHELIX_SEED=7" "VGPU_HAZARD=abort" "VGPU_COMM_TIMEOUT=10")

# The whole API of the toolkit's nccl.h is wrapped (and may be the device API's host functions),
# and every wrapped name (and its pncclX)
# exists in the real libnccl.so.2.
dh_add_test(NAME nccl.api
  COMMAND bash ${_nccl_dir}/check_api.sh $<TARGET_FILE:dhelix_shim> ${DH_CUDA_ROOT}
  LABELS nccl TIMEOUT 30)
