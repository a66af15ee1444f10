# Operation records (scheduler/op*.c, real.c, blas_state.c): every kind captured with its
# deep copies, everything the framework owns then changed or freed, replayed on a context
# the test builds, and compared bit for bit with the same call made directly; with a copy
# disabled (op_break.h) the same scenario must differ. Linked against dh_sched and the
# real libraries by name; run on the vgpu with its hazard detector aborting.
set(_op_dir ${CMAKE_CURRENT_SOURCE_DIR}/shim)

add_library(shim_op_common OBJECT ${_op_dir}/op_common.c)
target_include_directories(shim_op_common PRIVATE ${PROJECT_SOURCE_DIR}/tests/vgpu/include)
target_link_libraries(shim_op_common PRIVATE dh_sched dh::real_cuda PkgConfig::CMOCKA)

foreach(t kernel blas lt copy errors)
  add_executable(shim_test_op_${t} ${_op_dir}/test_op_${t}.c $<TARGET_OBJECTS:shim_op_common>)
  target_include_directories(shim_test_op_${t} PRIVATE ${_op_dir}
                             ${PROJECT_SOURCE_DIR}/tests/vgpu/include)
  target_link_libraries(shim_test_op_${t} PRIVATE dh_sched dh::real_cuda PkgConfig::CMOCKA
                        Threads::Threads ${CMAKE_DL_LIBS})
  add_dependencies(shim_test_op_${t} vgpu_all)
  set(_labels shim asan)
  if(t MATCHES "^(kernel|blas)$") # captures and the handle mirror from several threads
    list(APPEND _labels tsan)
  endif()
  dh_add_test(NAME shim.op_${t} COMMAND shim_test_op_${t} LABELS ${_labels} VGPU TIMEOUT 120
              ENV "VGPU_HAZARD=abort")
endforeach()

# The dependency rules' set of older allocations a strand certainly wrote (scheduler/dispatch/deps.c):
# a unit test of dh_deps_taint_t, no device work.
add_executable(shim_test_deps ${_op_dir}/test_deps.c)
target_link_libraries(shim_test_deps PRIVATE dh_sched dh::real_cuda PkgConfig::CMOCKA
                      Threads::Threads ${CMAKE_DL_LIBS})
add_dependencies(shim_test_deps vgpu_all)
dh_add_test(NAME shim.deps COMMAND shim_test_deps LABELS shim asan VGPU TIMEOUT 30)

# Auto mode's rounds on the ranks' agreement channel (scheduler/modes/agree.h): a rank that will
# hold no plan, the switch back, a rank that never comes; ranks are processes of the test.
add_executable(shim_test_agree ${_op_dir}/test_agree.c)
target_link_libraries(shim_test_agree PRIVATE dh_sched Threads::Threads ${CMAKE_DL_LIBS})
dh_add_test(NAME shim.agree COMMAND shim_test_agree LABELS shim asan tsan TIMEOUT 60)

# The agreement channel with many ranks (tests/shim/test_agree_scale.c): 16 and 64 processes
# each take switch, pair and switch-back rounds; a wrong decision or a round that does not
# complete fails it. scripts/agree-scale runs it up to 1024 ranks and prints the figures.
add_executable(shim_test_agree_scale ${_op_dir}/test_agree_scale.c)
target_link_libraries(shim_test_agree_scale PRIVATE dh_sched Threads::Threads ${CMAKE_DL_LIBS})
dh_add_test(NAME shim.agree_scale
            COMMAND sh -c "$<TARGET_FILE:shim_test_agree_scale> 16 && $<TARGET_FILE:shim_test_agree_scale> 64"
            LABELS shim asan TIMEOUT 120 ENV "DH_AGREE_SCALE_LIMIT_S=50")
