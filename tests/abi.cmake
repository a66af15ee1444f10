# vgpu.abi: every symbol a vgpu library defines exists in the real library of the same
# soname, with the same version node where the real one is versioned.
dh_add_test(NAME vgpu.abi
  COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/abi/check_abi.sh ${VGPU_LIBDIR} ${DH_CUDA_ROOT}
  LABELS vgpu TIMEOUT 120)
