# vgpu.interference: compute/communication/copy co-running rules of the cost model.
vgpu_test_exe(vgpu_test_interference test_interference.c)
dh_add_test(NAME vgpu.interference COMMAND $<TARGET_FILE:vgpu_test_interference>
  ENV VGPU_TIMING_ONLY=1 LABELS vgpu asan tsan VGPU TIMEOUT 60)

# vgpu.record_queue: with one hardware queue an event record does not hold the queue.
vgpu_test_exe(vgpu_test_record_queue test_record_queue.c)
dh_add_test(NAME vgpu.record_queue COMMAND $<TARGET_FILE:vgpu_test_record_queue>
  ENV VGPU_TIMING_ONLY=1 CUDA_DEVICE_MAX_CONNECTIONS=1 LABELS vgpu asan VGPU TIMEOUT 60)
