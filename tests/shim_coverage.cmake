# The shim's proof of exactness (issue 3, "What must be shown"): the coverage program
# (tests/shim/coverage.c), run without the shim, in passthrough, in stress with many seeds
# and in two-strand execution, every output bit-identical and no hazard; the test-only
# breaks, each of which must make one of those runs fail; a smoke run of the overhead
# benchmark. Labels: shim (+ asan) for the full runs, shim-tsan/tsan for a shorter variant.
set(_cov_dir ${CMAKE_CURRENT_SOURCE_DIR}/shim)

# The program: linked against the real libraries (by name, as a user's binary is), run on
# the vgpu, with the shim preloaded or not.
add_executable(shim_coverage ${_cov_dir}/coverage.c ${_cov_dir}/coverage_dev.c
               ${_cov_dir}/coverage_nccl.c ${_cov_dir}/coverage_blas.c
               ${_cov_dir}/coverage_sync.c ${_cov_dir}/coverage_entry.c)
target_include_directories(shim_coverage PRIVATE ${PROJECT_SOURCE_DIR}/tests/vgpu/include
                           ${PROJECT_SOURCE_DIR}/preload)
target_link_libraries(shim_coverage PRIVATE dh::real_cuda dh::entry_list Threads::Threads
                      ${CMAKE_DL_LIBS} m)

# The drivers run without the shim and start the program under each configuration.
foreach(t coverage breaks)
  add_executable(shim_test_${t} ${_cov_dir}/test_${t}.c ${_cov_dir}/cov_runs.c
                 ${_cov_dir}/runner.c)
  target_include_directories(shim_test_${t} PRIVATE ${_cov_dir}
                             ${PROJECT_SOURCE_DIR}/scheduler/dispatch ${PROJECT_SOURCE_DIR}/scheduler/ops)
  target_link_libraries(shim_test_${t} PRIVATE dh::common PkgConfig::CMOCKA PkgConfig::JANSSON
                        Threads::Threads ${CMAKE_DL_LIBS})
  add_dependencies(shim_test_${t} dhelix_shim shim_coverage vgpu_all)
endforeach()

# The overhead benchmark (not a test; scripts/bench-shim runs it), and its smoke test.
add_executable(shim_bench_overhead ${_cov_dir}/bench_overhead.c)
target_include_directories(shim_bench_overhead PRIVATE ${PROJECT_SOURCE_DIR}/tests/vgpu/include)
target_link_libraries(shim_bench_overhead PRIVATE dh::real_cuda dh::common Threads::Threads
                      ${CMAKE_DL_LIBS} m)

# The environment that selects two-strand execution (DHELIX_MODE=test-strands: strands assigned
# by issuing-thread phases until the plan issue supplies the assignment). If the shim's
# configuration table stops accepting it, the two-strand part of shim.coverage reports SKIP
# (exit 77), never a pass, and shim.breaks tries the breaks in stress mode only.
set(DH_COV_STRANDS_ENV "DHELIX_MODE=test-strands" CACHE STRING
    "Settings (;-separated) that run the shim in two-strand execution for shim.coverage")

set(_cov_pre "$<TARGET_FILE:dhelix_shim>")
set(_cov_vgpu "")
if(DH_SANITIZER_PRELOAD)
  set(_cov_pre "${DH_SANITIZER_PRELOAD}:${_cov_pre}")
  set(_cov_vgpu "${DH_SANITIZER_PRELOAD}:")
endif()
list(JOIN VGPU_PRELOAD_LIBS ":" _cov_libs)
list(JOIN DH_COV_STRANDS_ENV "|" _cov_strands)
set(_cov_env
    "DH_TEST_COVERAGE=$<TARGET_FILE:shim_coverage>"
    "DH_TEST_SHIM=$<TARGET_FILE:dhelix_shim>"
    "DH_TEST_PRELOAD=${_cov_pre}:${_cov_libs}"
    "DH_TEST_VGPU_PRELOAD=${_cov_vgpu}${_cov_libs}"
    "DH_TEST_LIBDIR=${VGPU_LIBDIR}"
    "DH_COV_STRANDS_ENV=${_cov_strands}")

dh_add_test(NAME shim.coverage COMMAND shim_test_coverage LABELS shim asan TIMEOUT 240
  ENV ${_cov_env} "DH_COV_SEEDS=20" "DH_COV_STRAND_SEEDS=4")
dh_add_test(NAME shim.coverage_tsan COMMAND shim_test_coverage LABELS shim-tsan tsan
  TIMEOUT 300
  ENV ${_cov_env} "DH_COV_SEEDS=3" "DH_COV_STRAND_SEEDS=2" "DH_COV_ITERS=1")
dh_add_test(NAME shim.breaks COMMAND shim_test_breaks LABELS shim TIMEOUT 240
  ENV ${_cov_env} "DH_COV_BREAK_SEEDS=4")
dh_add_test(NAME shim.bench_smoke COMMAND shim_bench_overhead --smoke LABELS shim TIMEOUT 60
  ENV "LD_PRELOAD=${_cov_pre}:${_cov_libs}" "LD_LIBRARY_PATH=${VGPU_LIBDIR}")

# Plan mode with pairs (issue 28): the program's two-rank variant (--tp2, two processes under
# mpiexec) through profile mode, `dhelix plan` and the plan run on the vgpu's a40 slowed 64
# times (tests/si/a40-div64.json: its all-reduce lasts long enough that pairing pays); exact
# on both ranks, no hazard, paired groups on both, and the test breaks drain_generated and
# pool_barrier caught in the plan run (tests/shim/plan_cov.sh says what it judges).
if(DH_HAVE_MPI)
  dh_add_test(NAME shim.plan_coverage COMMAND ${_cov_dir}/plan_cov.sh
    LABELS shim asan TIMEOUT 300
    ENV "DH_TEST_COVERAGE=$<TARGET_FILE:shim_coverage>" "DH_TEST_PRELOAD=${_cov_pre}:${_cov_libs}"
        "DH_TEST_VGPU_PRELOAD=${_cov_vgpu}${_cov_libs}" "DH_TEST_LIBDIR=${VGPU_LIBDIR}"
        "DH_TEST_DHELIX=$<TARGET_FILE:dhelix>" "DH_TEST_MPIEXEC=${MPIEXEC_EXECUTABLE}"
        "DH_TEST_DEVICE=${PROJECT_SOURCE_DIR}/tests/si/a40-div64.json"
        "DH_TEST_WORK=${CMAKE_CURRENT_BINARY_DIR}/plan_coverage" "VGPU_COMM_TIMEOUT=60")
endif()

# Failing calls (issue 13): tests/shim/errprobe.c's output must be byte-identical without
# the shim and with it in passthrough, stress (three seeds), strands and profile mode.
add_executable(shim_errprobe ${_cov_dir}/errprobe.c)
target_include_directories(shim_errprobe PRIVATE ${PROJECT_SOURCE_DIR}/tests/vgpu/include)
target_link_libraries(shim_errprobe PRIVATE dh::real_cuda ${CMAKE_DL_LIBS})
add_dependencies(shim_errprobe dhelix_shim vgpu_all)
dh_add_test(NAME shim.errors COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/shim/errprobe.sh
  LABELS shim asan TIMEOUT 120
  ENV "DH_TEST_ERRPROBE=$<TARGET_FILE:shim_errprobe>" "DH_TEST_SHIM=$<TARGET_FILE:dhelix_shim>"
      "DH_TEST_PRELOAD=${_cov_pre}:${_cov_libs}" "DH_TEST_VGPU_PRELOAD=${_cov_vgpu}${_cov_libs}"
      "DH_TEST_LIBDIR=${VGPU_LIBDIR}")

# CUDA libraries outside the global scope (a library dlopened with RTLD_LOCAL brings them
# in, as Python does with PyTorch): the shim alone is preloaded and must still find them.
add_library(local_user SHARED ${_cov_dir}/local_user.c)
target_link_libraries(local_user PRIVATE dh::real_cuda)
set_target_properties(local_user PROPERTIES C_VISIBILITY_PRESET hidden)
add_executable(shim_local_scope ${_cov_dir}/local_scope.c)
target_link_libraries(shim_local_scope PRIVATE ${CMAKE_DL_LIBS})
add_dependencies(shim_local_scope local_user dhelix_shim vgpu_all)
dh_add_test(NAME shim.local_scope COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/shim/local_scope.sh
  LABELS shim asan TIMEOUT 60
  ENV "DH_TEST_PROG=$<TARGET_FILE:shim_local_scope>" "DH_TEST_LIB=$<TARGET_FILE:local_user>"
      "DH_TEST_SHIM=$<TARGET_FILE:dhelix_shim>" "DH_TEST_SAN=${DH_SANITIZER_PRELOAD}"
      "DH_TEST_LIBDIR=${VGPU_LIBDIR}")
