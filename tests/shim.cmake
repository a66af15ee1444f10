# Shim tests: the common library (status, table, config, log), the preloaded library in
# front of the real CUDA libraries (no device) and in front of the vgpu, the CLI and the
# generated configuration docs. Labels: shim; asan for the fast ones; tsan for the ones
# that exercise threads (logging, counters).
set(_shim_dir ${CMAKE_CURRENT_SOURCE_DIR}/shim)

# Unit tests of dh_common.
foreach(t status table config log membound)
  add_executable(shim_test_${t} ${_shim_dir}/test_${t}.c)
  target_link_libraries(shim_test_${t} PRIVATE dh::common PkgConfig::CMOCKA PkgConfig::JANSSON
                        Threads::Threads)
endforeach()
dh_add_test(NAME shim.status COMMAND shim_test_status LABELS shim asan TIMEOUT 30)
dh_add_test(NAME shim.table COMMAND shim_test_table LABELS shim asan TIMEOUT 30)
dh_add_test(NAME shim.config COMMAND shim_test_config LABELS shim asan TIMEOUT 30)
dh_add_test(NAME shim.log COMMAND shim_test_log LABELS shim asan tsan TIMEOUT 60)
dh_add_test(NAME shim.membound COMMAND shim_test_membound LABELS shim plan asan TIMEOUT 30)

# The program under the shim. shim_child links the real libraries as a user's program
# does (dh::real_cuda, whose libcuda stub makes it need a libcuda.so.1 at run time: the
# vgpu's or a driver's); shim_child_nodrv is the same program without libcuda and libnccl,
# so that shim.preload runs on machines with neither: it links libdh_fakedrv.so instead, a
# stand-in that defines the driver and NCCL entry points the shim wraps (the child finds
# them with dlsym, so --no-as-needed keeps the library it never references directly).
add_library(shim_fakedrv SHARED ${_shim_dir}/fakedrv.c)
set_target_properties(shim_fakedrv PROPERTIES OUTPUT_NAME dh_fakedrv C_VISIBILITY_PRESET hidden)
target_include_directories(shim_fakedrv PRIVATE ${PROJECT_SOURCE_DIR}/preload ${PROJECT_SOURCE_DIR}/nccl_wrap)
target_link_libraries(shim_fakedrv PRIVATE dh::cuda_headers dh::entry_list)
add_executable(shim_child ${_shim_dir}/child.c)
target_include_directories(shim_child PRIVATE ${PROJECT_SOURCE_DIR}/tests/vgpu/include
                           ${PROJECT_SOURCE_DIR}/preload ${PROJECT_SOURCE_DIR}/nccl_wrap)
target_link_libraries(shim_child PRIVATE dh::real_cuda dh::entry_list Threads::Threads
                      ${CMAKE_DL_LIBS})
add_executable(shim_child_nodrv ${_shim_dir}/child.c)
target_include_directories(shim_child_nodrv PRIVATE ${PROJECT_SOURCE_DIR}/tests/vgpu/include
                           ${PROJECT_SOURCE_DIR}/preload ${PROJECT_SOURCE_DIR}/nccl_wrap)
target_link_libraries(shim_child_nodrv PRIVATE dh::cuda_headers dh::entry_list ${DH_REAL_cudart}
                      ${DH_REAL_cublas} ${DH_REAL_cublasLt} shim_fakedrv Threads::Threads
                      ${CMAKE_DL_LIBS})
target_link_options(shim_child_nodrv PRIVATE LINKER:--no-as-needed)
add_executable(shim_orphan ${_shim_dir}/orphan.c)
target_link_libraries(shim_orphan PRIVATE dh::cuda_headers ${CMAKE_DL_LIBS})
# A library that calls a wrapped API from inside a wrapped API, and its caller.
add_library(shim_fakeblas SHARED ${_shim_dir}/fakeblas.c)
set_target_properties(shim_fakeblas PROPERTIES OUTPUT_NAME dh_fakeblas C_VISIBILITY_PRESET hidden)
target_link_libraries(shim_fakeblas PRIVATE dh::cuda_headers ${DH_REAL_cudart})
add_executable(shim_nested ${_shim_dir}/nested.c)
target_link_libraries(shim_nested PRIVATE shim_fakeblas dh::cuda_headers ${DH_REAL_cudart})

# Drivers: they run without the shim and start the child with it.
foreach(t preload passthrough)
  add_executable(shim_test_${t} ${_shim_dir}/test_${t}.c ${_shim_dir}/runner.c)
  target_include_directories(shim_test_${t} PRIVATE ${_shim_dir} ${PROJECT_SOURCE_DIR}/preload
                             ${PROJECT_SOURCE_DIR}/scheduler/dispatch
                             ${PROJECT_SOURCE_DIR}/scheduler/ops)
  target_link_libraries(shim_test_${t} PRIVATE dh::cuda_headers dh::entry_list PkgConfig::CMOCKA
                        PkgConfig::JANSSON)
  add_dependencies(shim_test_${t} dhelix_shim shim_child shim_child_nodrv shim_orphan
                   shim_nested)
endforeach()
add_dependencies(shim_test_passthrough vgpu_all)

# LD_PRELOAD lists: the sanitizer runtime (if any) must come first, then the shim in
# front of everything it wraps.
set(_pre "$<TARGET_FILE:dhelix_shim>")
if(DH_SANITIZER_PRELOAD)
  set(_pre "${DH_SANITIZER_PRELOAD}:${_pre}")
endif()
list(JOIN VGPU_PRELOAD_LIBS ":" _vgpu_libs)

dh_add_test(NAME shim.preload COMMAND shim_test_preload LABELS shim asan TIMEOUT 120
  ENV "DH_TEST_CHILD=$<TARGET_FILE:shim_child_nodrv>" "DH_TEST_ORPHAN=$<TARGET_FILE:shim_orphan>"
      "DH_TEST_NESTED=$<TARGET_FILE:shim_nested>"
      "DH_TEST_SHIM=$<TARGET_FILE:dhelix_shim>" "DH_TEST_PRELOAD=${_pre}"
      "DH_TEST_VGPU_CUBLAS=${VGPU_LIBDIR}/libcublas.so.13" "DH_TEST_VGPU_LIBDIR=${VGPU_LIBDIR}")
dh_add_test(NAME shim.passthrough COMMAND shim_test_passthrough LABELS shim asan tsan TIMEOUT 180
  ENV "DH_TEST_CHILD=$<TARGET_FILE:shim_child>" "DH_TEST_PRELOAD=${_pre}:${_vgpu_libs}"
      "DH_TEST_LIBDIR=${VGPU_LIBDIR}")

# Every allocation entry point the shim wraps gives memory back and retries before the
# program's allocation fails, and returns the library's own error when that cannot help.
add_executable(shim_alloc_retry ${_shim_dir}/alloc_retry.c)
target_link_libraries(shim_alloc_retry PRIVATE dh::real_cuda)
add_dependencies(shim_alloc_retry dhelix_shim vgpu_all)
dh_add_test(NAME shim.alloc_retry COMMAND bash ${_shim_dir}/alloc_retry.sh LABELS shim asan TIMEOUT 120
  ENV "DH_TEST_PROG=$<TARGET_FILE:shim_alloc_retry>" "DH_TEST_PRELOAD=${_pre}:${_vgpu_libs}"
      "DH_TEST_LIBDIR=${VGPU_LIBDIR}")

# The CLI, and the configuration section of the docs against its generator.
dh_add_test(NAME cli.basic
  COMMAND ${CMAKE_COMMAND} -DDHELIX=$<TARGET_FILE:dhelix> -DVERSION=${PROJECT_VERSION}
          -P ${CMAKE_CURRENT_SOURCE_DIR}/cli/cli_basic.cmake
  LABELS shim asan TIMEOUT 60)
dh_add_test(NAME docs.config
  COMMAND ${CMAKE_COMMAND} -DDHELIX=$<TARGET_FILE:dhelix>
          -DDOC=${PROJECT_SOURCE_DIR}/docs/configuration.md
          -P ${CMAKE_CURRENT_SOURCE_DIR}/docs/check_config_doc.cmake
  LABELS shim asan TIMEOUT 30)
# The house's layout: scheduler/'s layers (no header includes one of a higher layer, each
# folder's main header says what it owns and may call), README.md a front page of at most
# 300 lines, every link and source path named in the Markdown files resolves.
dh_add_test(NAME docs.layout
  COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/docs/check_layout.sh ${PROJECT_SOURCE_DIR}
  LABELS shim TIMEOUT 60)
# `cmake --build <dir> --target docs-config` rewrites docs/configuration.md.
add_custom_target(docs-config
  COMMAND ${CMAKE_COMMAND} -DDHELIX=$<TARGET_FILE:dhelix>
          -DDOC=${PROJECT_SOURCE_DIR}/docs/configuration.md -DUPDATE=1
          -P ${CMAKE_CURRENT_SOURCE_DIR}/docs/check_config_doc.cmake
  DEPENDS dhelix VERBATIM)

# Every entry point of the toolkit handled (issue 28): the exports of the real libraries and
# cuda.h's declarations against the shim's definitions and the host-only list.
find_package(Python3 REQUIRED COMPONENTS Interpreter)
get_filename_component(_ep_cuda_dir "${DH_REAL_cudart}" DIRECTORY)
get_filename_component(_ep_nccl_dir "${DH_REAL_nccl}" DIRECTORY)
dh_add_test(NAME shim.entry_points
  COMMAND ${Python3_EXECUTABLE} ${_shim_dir}/test_entry_points.py LABELS shim TIMEOUT 60
  ENV "DH_TEST_SHIM=$<TARGET_FILE:dhelix_shim>"
      "DH_TEST_HOST_ONLY=${PROJECT_SOURCE_DIR}/preload/entries/host_only.txt"
      "DH_TEST_ENTRY_TABLE=${DH_ENTRY_TABLE}" "DH_TEST_CUDA_LIBDIR=${_ep_cuda_dir}"
      "DH_TEST_NCCL_LIBDIR=${_ep_nccl_dir}" "DH_TEST_CUDA_INCLUDE=${DH_CUDA_INCLUDE}"
      "DH_TEST_NCCL_INCLUDE=${DH_NCCL_ROOT}/include" "DH_TEST_INTEROP_TYPES=${DH_ENTRY_DIR}/interop"
      "DH_TEST_CC=${CMAKE_C_COMPILER}")
# The generator itself, on small headers the test writes (rules and refusals).
dh_add_test(NAME shim.gen_entries
  COMMAND ${Python3_EXECUTABLE} ${_shim_dir}/test_gen_entries.py LABELS shim TIMEOUT 60
  ENV "DH_TEST_GEN=${PROJECT_SOURCE_DIR}/scripts/gen-entries" "DH_TEST_CC=${CMAKE_C_COMPILER}")
