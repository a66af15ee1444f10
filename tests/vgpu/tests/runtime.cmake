# Behaviour tests of the vgpu's runtime and driver (libcudart.so.13, libcuda.so.1): one
# program and one CTest entry per file, written against the CUDA headers and vgpu.h only.
# rt_common.c holds the test kernels, assertions and the child-process runner they share.
add_library(vgpu_rt_common OBJECT ${CMAKE_CURRENT_SOURCE_DIR}/rt_common.c)
target_include_directories(vgpu_rt_common PRIVATE ${CMAKE_CURRENT_SOURCE_DIR}
                           ${PROJECT_SOURCE_DIR}/tests/vgpu/include)
target_link_libraries(vgpu_rt_common PRIVATE dh::cuda_headers PkgConfig::CMOCKA)

# name -> extra labels
set(_vgpu_rt_tests device memory streams events kernels driver cost queues hazard determinism
    threads entry_ops)
foreach(t ${_vgpu_rt_tests})
  vgpu_test_exe(vgpu_rt_${t} ${CMAKE_CURRENT_SOURCE_DIR}/test_${t}.c $<TARGET_OBJECTS:vgpu_rt_common>)
  # Exported symbols let the device name an unregistered kernel's host stub (dladdr).
  set_target_properties(vgpu_rt_${t} PROPERTIES ENABLE_EXPORTS ON)
  target_link_libraries(vgpu_rt_${t} PRIVATE dl)
  set(_labels vgpu asan)
  # The device's lock, the progress thread and cross-thread event polling run in these.
  if(t MATCHES "^(threads|streams|events|hazard|determinism)$")
    list(APPEND _labels tsan)
  endif()
  dh_add_test(NAME vgpu.${t} COMMAND $<TARGET_FILE:vgpu_rt_${t}> LABELS ${_labels} VGPU TIMEOUT 120)
endforeach()
target_link_libraries(vgpu_rt_determinism PRIVATE PkgConfig::JANSSON)

# The device test loads the shipped example JSON profile too.
target_compile_definitions(vgpu_rt_device PRIVATE VGT_PROFILE_DIR="${PROJECT_SOURCE_DIR}/tests/vgpu/profiles")
