# dh_add_test(NAME name COMMAND cmd... [LABELS l...] [TIMEOUT s] [ENV k=v...] [VGPU])
# One CTest entry per test file. VGPU runs the command with the vgpu libraries in front of
# the real ones (what scripts/vgpu-run does). Exit code 77 means skipped.
set(VGPU_LIBDIR "${CMAKE_BINARY_DIR}/vgpu/lib")
set(VGPU_PRELOAD_LIBS
    "${VGPU_LIBDIR}/libcudart.so.13" "${VGPU_LIBDIR}/libcuda.so.1" "${VGPU_LIBDIR}/libcublasLt.so.13"
    "${VGPU_LIBDIR}/libcublas.so.13" "${VGPU_LIBDIR}/libnccl.so.2")
set(_pre "${VGPU_PRELOAD_LIBS}")
if(DH_SANITIZER_PRELOAD)
  list(PREPEND _pre "${DH_SANITIZER_PRELOAD}")
endif()
list(JOIN _pre ":" VGPU_PRELOAD)

function(dh_add_test)
  cmake_parse_arguments(T "VGPU" "NAME;TIMEOUT" "COMMAND;LABELS;ENV" ${ARGN})
  if(NOT T_TIMEOUT)
    set(T_TIMEOUT 120)
  endif()
  add_test(NAME ${T_NAME} COMMAND ${T_COMMAND})
  set(env ${T_ENV} "OMPI_ALLOW_RUN_AS_ROOT=1" "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1"
          "OMPI_MCA_rmaps_base_oversubscribe=1" "OMPI_MCA_btl=self,vader"
          "ASAN_OPTIONS=verify_asan_link_order=0:detect_leaks=1:abort_on_error=0"
          "LSAN_OPTIONS=suppressions=${PROJECT_SOURCE_DIR}/tests/lsan.supp:print_suppressions=0"
          "UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1"
          "TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1:suppressions=${PROJECT_SOURCE_DIR}/tests/tsan.supp")
  if(T_VGPU)
    list(APPEND env "LD_PRELOAD=${VGPU_PRELOAD}" "LD_LIBRARY_PATH=${VGPU_LIBDIR}")
  endif()
  set_tests_properties(${T_NAME} PROPERTIES TIMEOUT ${T_TIMEOUT} SKIP_RETURN_CODE 77
                       ENVIRONMENT "${env}" LABELS "${T_LABELS}")
endfunction()
