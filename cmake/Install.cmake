# Install rules: `cmake --install build --prefix P` (or the wheel, pyproject.toml).
#
# Components, so that a package takes only what it ships:
#   shim   P/lib/libdhelix_shim.so, P/bin/dhelix, P/bin/dhelix-pairs,
#          P/include/dhelix_nccl.h (the shim's one public C interface)
#   docs   P/share/doc/dhelix/ (README.md, docs/*.md and their pictures)
#   vgpu   the CPU device and what the demo runs on it, under P/share/dhelix/vgpu/
#          (lib/: the five libraries with the real sonames, libvgpu.so.0 and libvgpu_nvtx.so,
#          the NVTX injection that names the trace's lanes; bin/workload;
#          profiles/: the demo's device), and P/bin/dhelix-vgpu-run, the launcher that puts
#          them in front of the real libraries (scripts/vgpu-run, which finds them beside
#          itself when installed). Only with DH_BUILD_TESTS.
#
# Why the vgpu is under share/dhelix/vgpu and not in P/lib: its libraries carry the sonames
# of the real CUDA, cuBLAS and NCCL (libcudart.so.13, libnccl.so.2, ...). In P/lib, where a
# user's LD_LIBRARY_PATH or an rpath may point, they would shadow a real installation and a
# training job would run on the CPU device without saying so. Kept apart, they are reached
# only through dhelix-vgpu-run, which a user calls on purpose.
#
# The shim's own dependencies (libunwind, jansson) are found at run time through an RPATH
# to the directories they were linked from when those are not the system's (a GPU image
# where scripts/gpu-wheels carries them in .whl/deps/); from the system's directories they
# need nothing. The CUDA libraries are never in an RPATH: the shim must find the copy the
# program loads (preload/CMakeLists.txt), and dhelix-pairs and the workload take whatever
# the machine or the vgpu launcher provides.
include(GNUInstallDirs)

# The non-system directories of the libraries the installed programs link (pkg-config's
# library directories of libunwind and jansson), as an install RPATH.
set(_dh_rpath "")
foreach(_dir IN LISTS UNWIND_LIBRARY_DIRS JANSSON_LIBRARY_DIRS)
  list(FIND CMAKE_C_IMPLICIT_LINK_DIRECTORIES "${_dir}" _implicit)
  if(_implicit EQUAL -1 AND NOT _dir MATCHES "^/(usr/)?lib")
    list(APPEND _dh_rpath "${_dir}")
  endif()
endforeach()
list(REMOVE_DUPLICATES _dh_rpath)
set_target_properties(dhelix_shim dhelix dhelix-pairs PROPERTIES INSTALL_RPATH "${_dh_rpath}")

install(TARGETS dhelix_shim LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT shim)
install(TARGETS dhelix dhelix-pairs RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR} COMPONENT shim)
install(FILES ${PROJECT_SOURCE_DIR}/nccl_wrap/dhelix_nccl.h
        DESTINATION ${CMAKE_INSTALL_INCLUDEDIR} COMPONENT shim)

set(DH_DOCDIR ${CMAKE_INSTALL_DATADIR}/doc/dhelix)
install(FILES ${PROJECT_SOURCE_DIR}/README.md DESTINATION ${DH_DOCDIR} COMPONENT docs)
install(DIRECTORY ${PROJECT_SOURCE_DIR}/docs/ DESTINATION ${DH_DOCDIR}/docs COMPONENT docs)

if(DH_BUILD_TESTS)
  set(DH_VGPU_DIR ${CMAKE_INSTALL_DATADIR}/dhelix/vgpu)
  # The API libraries find libvgpu.so.0 beside themselves, as in the build tree.
  set_target_properties(vgpu vgpu_cudart vgpu_driver vgpu_cublaslt vgpu_cublas vgpu_nccl
                        vgpu_nvtx PROPERTIES INSTALL_RPATH "$ORIGIN")
  install(TARGETS vgpu vgpu_cudart vgpu_driver vgpu_cublaslt vgpu_cublas vgpu_nccl vgpu_nvtx
          LIBRARY DESTINATION ${DH_VGPU_DIR}/lib COMPONENT vgpu NAMELINK_SKIP)
  install(TARGETS workload RUNTIME DESTINATION ${DH_VGPU_DIR}/bin COMPONENT vgpu)
  if(TARGET wl_kernels_gpu) # the workload's device code for a real GPU, beside it
    install(TARGETS wl_kernels_gpu LIBRARY DESTINATION ${DH_VGPU_DIR}/bin COMPONENT vgpu)
  endif()
  install(FILES ${PROJECT_SOURCE_DIR}/tests/si/a40-div64.json
                ${PROJECT_SOURCE_DIR}/tests/vgpu/profiles/h100-pcie-example.json
          DESTINATION ${DH_VGPU_DIR}/profiles COMPONENT vgpu)
  install(PROGRAMS ${PROJECT_SOURCE_DIR}/scripts/vgpu-run DESTINATION ${CMAKE_INSTALL_BINDIR}
          RENAME dhelix-vgpu-run COMPONENT vgpu)
endif()
