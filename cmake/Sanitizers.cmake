# DH_SANITIZE=address,undefined or thread instruments every target. Programs run with the
# vgpu libraries preloaded, so the sanitizer runtime must be loaded before them:
# DH_SANITIZER_PRELOAD names it for VgpuTest.cmake and scripts/vgpu-run.
set(DH_SANITIZER_PRELOAD "")
if(DH_SANITIZE)
  add_compile_options(-fsanitize=${DH_SANITIZE} -fno-sanitize-recover=all -g)
  add_link_options(-fsanitize=${DH_SANITIZE})
  if(DH_SANITIZE MATCHES "address")
    set(_rt libasan.so)
  elseif(DH_SANITIZE MATCHES "thread")
    set(_rt libtsan.so)
  endif()
  if(_rt)
    execute_process(COMMAND ${CMAKE_C_COMPILER} -print-file-name=${_rt}
                    OUTPUT_VARIABLE DH_SANITIZER_PRELOAD OUTPUT_STRIP_TRAILING_WHITESPACE)
  endif()
endif()
