# vgpu.nccl.*: the vgpu's libnccl.so.2 (tests/vgpu/src/nccl). MPI programs linked against the
# real libnccl; each file is one CTest entry (the collective test once per world size).
# The whole set takes well under a minute on 2 cores.
vgpu_test_exe(vgpu_test_nccl_coll test_nccl_coll.c nccl_common.c)
add_dependencies(vgpu_test_nccl_coll vgpu_all) # runs with the vgpu libraries preloaded
foreach(np 2 4 8)
  dh_add_test(NAME vgpu.nccl.coll.np${np}
    COMMAND ${MPIEXEC_EXECUTABLE} -n ${np} --oversubscribe --allow-run-as-root $<TARGET_FILE:vgpu_test_nccl_coll>
    ENV VGPU_COMM_TIMEOUT=20 LABELS vgpu VGPU TIMEOUT 90)
endforeach()

vgpu_test_exe(vgpu_test_nccl_errors test_nccl_errors.c nccl_common.c)
add_dependencies(vgpu_test_nccl_errors vgpu_all)
dh_add_test(NAME vgpu.nccl.errors
  COMMAND ${MPIEXEC_EXECUTABLE} -n 2 --oversubscribe --allow-run-as-root $<TARGET_FILE:vgpu_test_nccl_errors>
  ENV VGPU_COMM_TIMEOUT=2 LABELS vgpu VGPU TIMEOUT 60)

# A cycle of waits across communicators on one hardware queue is reported as a deadlock within
# seconds (src/nccl/nccl_deadlock.c), long before VGPU_COMM_TIMEOUT; no cycle, no report.
vgpu_test_exe(vgpu_test_nccl_deadlock test_nccl_deadlock.c nccl_common.c)
add_dependencies(vgpu_test_nccl_deadlock vgpu_all)
dh_add_test(NAME vgpu.nccl.deadlock
  COMMAND ${MPIEXEC_EXECUTABLE} -n 2 --oversubscribe --allow-run-as-root $<TARGET_FILE:vgpu_test_nccl_deadlock>
  ENV VGPU_COMM_TIMEOUT=60 CUDA_DEVICE_MAX_CONNECTIONS=1 LABELS vgpu VGPU TIMEOUT 90)

vgpu_test_exe(vgpu_test_nccl_timing test_nccl_timing.c nccl_common.c rt_common.c)
add_dependencies(vgpu_test_nccl_timing vgpu_all)
dh_add_test(NAME vgpu.nccl.timing
  COMMAND ${MPIEXEC_EXECUTABLE} -n 4 --oversubscribe --allow-run-as-root $<TARGET_FILE:vgpu_test_nccl_timing>
  ENV VGPU_TIMING_ONLY=1 VGPU_DEVICE=h100 VGPU_COMM_TIMEOUT=20 LABELS vgpu VGPU TIMEOUT 60)
dh_add_test(NAME vgpu.nccl.timing.inter
  COMMAND ${MPIEXEC_EXECUTABLE} -n 4 --oversubscribe --allow-run-as-root $<TARGET_FILE:vgpu_test_nccl_timing>
  ENV VGPU_TIMING_ONLY=1 VGPU_DEVICE=${CMAKE_CURRENT_SOURCE_DIR}/nccl_gpn2.json VGPU_COMM_TIMEOUT=20
  LABELS vgpu VGPU TIMEOUT 60)

vgpu_test_exe(vgpu_test_nccl_comm test_nccl_comm.c nccl_common.c)
add_dependencies(vgpu_test_nccl_comm vgpu_all)
dh_add_test(NAME vgpu.nccl.comm
  COMMAND ${MPIEXEC_EXECUTABLE} -n 4 --oversubscribe --allow-run-as-root $<TARGET_FILE:vgpu_test_nccl_comm>
  ENV VGPU_COMM_TIMEOUT=20 LABELS vgpu VGPU TIMEOUT 60)

vgpu_test_exe(vgpu_test_nccl_single test_nccl_single.c nccl_common.c rt_common.c)
add_dependencies(vgpu_test_nccl_single vgpu_all)
dh_add_test(NAME vgpu.nccl.single COMMAND $<TARGET_FILE:vgpu_test_nccl_single>
  ENV VGPU_DEVICE=h100 VGPU_COMM_TIMEOUT=5 LABELS vgpu asan VGPU TIMEOUT 60)
