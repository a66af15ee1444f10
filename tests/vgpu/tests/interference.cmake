# vgpu.interference: compute/communication/copy co-running rules of the cost model.
vgpu_test_exe(vgpu_test_interference test_interference.c)
dh_add_test(NAME vgpu.interference COMMAND $<TARGET_FILE:vgpu_test_interference>
  ENV VGPU_TIMING_ONLY=1 LABELS vgpu asan tsan VGPU TIMEOUT 60)
