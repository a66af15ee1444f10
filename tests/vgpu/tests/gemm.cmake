# GEMM tests of the vgpu: the reference math (vgpu.gemm), cuBLAS (vgpu.cublas, its fp64
# GEMMs vgpu.cublas_fp64, its pointer-array batches vgpu.cublas_batched, its Set/Get
# helpers vgpu.cublas_helpers, the call-time statuses the shim mirrors vgpu.cublas_checks),
# cuBLASLt (vgpu.cublaslt; its algorithm API and statuses vgpu.cublaslt_algo) and the
# workspace hazards (vgpu.gemm_hazard). Programs link the real
# libraries; dh_add_test(... VGPU) puts the vgpu in front. The API tests share the runtime
# tests' kernels and child runner (vgpu_rt_common, runtime.cmake).
vgpu_test_exe(vgpu_test_gemm test_gemm.c gemm_common.c)
dh_add_test(NAME vgpu.gemm COMMAND vgpu_test_gemm LABELS vgpu asan VGPU TIMEOUT 300)
vgpu_test_exe(vgpu_test_cublas test_cublas.c gemm_common.c $<TARGET_OBJECTS:vgpu_rt_common>)
dh_add_test(NAME vgpu.cublas COMMAND vgpu_test_cublas LABELS vgpu asan VGPU TIMEOUT 300)
vgpu_test_exe(vgpu_test_cublaslt test_cublaslt.c gemm_common.c $<TARGET_OBJECTS:vgpu_rt_common>)
dh_add_test(NAME vgpu.cublaslt COMMAND vgpu_test_cublaslt LABELS vgpu asan VGPU TIMEOUT 300)
vgpu_test_exe(vgpu_test_cublas_fp64 test_cublas_fp64.c gemm_common.c $<TARGET_OBJECTS:vgpu_rt_common>)
dh_add_test(NAME vgpu.cublas_fp64 COMMAND vgpu_test_cublas_fp64 LABELS vgpu asan VGPU TIMEOUT 300)
vgpu_test_exe(vgpu_test_cublas_batched test_cublas_batched.c gemm_common.c $<TARGET_OBJECTS:vgpu_rt_common>)
dh_add_test(NAME vgpu.cublas_batched COMMAND vgpu_test_cublas_batched LABELS vgpu asan VGPU TIMEOUT 300)
vgpu_test_exe(vgpu_test_cublas_helpers test_cublas_helpers.c gemm_common.c $<TARGET_OBJECTS:vgpu_rt_common>)
dh_add_test(NAME vgpu.cublas_helpers COMMAND vgpu_test_cublas_helpers LABELS vgpu asan VGPU TIMEOUT 120)
vgpu_test_exe(vgpu_test_cublas_checks test_cublas_checks.c gemm_common.c $<TARGET_OBJECTS:vgpu_rt_common>)
dh_add_test(NAME vgpu.cublas_checks COMMAND vgpu_test_cublas_checks LABELS vgpu asan VGPU TIMEOUT 120)
vgpu_test_exe(vgpu_test_cublaslt_algo test_cublaslt_algo.c gemm_common.c $<TARGET_OBJECTS:vgpu_rt_common>)
dh_add_test(NAME vgpu.cublaslt_algo COMMAND vgpu_test_cublaslt_algo LABELS vgpu asan VGPU TIMEOUT 120)
vgpu_test_exe(vgpu_test_gemm_hazard test_gemm_hazard.c $<TARGET_OBJECTS:vgpu_rt_common>)
dh_add_test(NAME vgpu.gemm_hazard COMMAND vgpu_test_gemm_hazard LABELS vgpu asan VGPU TIMEOUT 300)
# The exported cuBLAS/cuBLASLt functions are a subset of the real libraries' (names and
# version nodes), and include every entry point of gemm_abi_required.txt.
dh_add_test(NAME vgpu.gemm_abi
  COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/gemm_abi.sh -r ${CMAKE_CURRENT_SOURCE_DIR}/gemm_abi_required.txt
          ${VGPU_LIBDIR}/libcublas.so.13 ${DH_REAL_cublas} libcublas.so.13
          ${VGPU_LIBDIR}/libcublasLt.so.13 ${DH_REAL_cublasLt} libcublasLt.so.13
  LABELS vgpu TIMEOUT 60)
