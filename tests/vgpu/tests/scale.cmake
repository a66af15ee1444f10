# vgpu.scale: a 64-GPU GPT-30B iteration, timing-only, representative ranks (under 1 min).
vgpu_test_exe(vgpu_test_scale test_scale.c)
dh_add_test(NAME vgpu.scale
  COMMAND ${MPIEXEC_EXECUTABLE} -n 2 --oversubscribe --allow-run-as-root $<TARGET_FILE:vgpu_test_scale>
  ENV VGPU_TIMING_ONLY=1 VGPU_DEVICE=a40 VGPU_HAZARD=warn
  LABELS vgpu VGPU TIMEOUT 60)

# vgpu.progress: a rank in MPI_Barrier with a collective pending must not stall its peers.
vgpu_test_exe(vgpu_test_progress test_progress.c)
dh_add_test(NAME vgpu.progress
  COMMAND ${MPIEXEC_EXECUTABLE} -n 2 --oversubscribe --allow-run-as-root $<TARGET_FILE:vgpu_test_progress>
  ENV VGPU_COMM_TIMEOUT=10 LABELS vgpu VGPU TIMEOUT 30)
