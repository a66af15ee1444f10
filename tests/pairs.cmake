# Overlap profiling (scheduler/pairs/, label "si"): pairs.spec tests the pure parts (op
# names, the selection, the arithmetic); pairs.vgpu.<device> runs dhelix-pairs under
# mpirun with 2 ranks on the vgpu on a hand-written profile (tests/pairs/profile_tp2.json:
# a 2-rank tensor-parallel layer, plus ops that must be skipped with a note) and judges the
# pair profile it writes (tests/pairs/check.c); pairs.vgpu.gemm_gate does the same with the
# gate a GPU uses (cuBLAS GEMMs, timed first), so that path runs without a GPU too.
set(_pairs_dir ${CMAKE_CURRENT_SOURCE_DIR}/pairs)
set(_pairs_profile ${_pairs_dir}/profile_tp2.json)

add_executable(pairs_test_spec ${_pairs_dir}/test_spec.c)
target_link_libraries(pairs_test_spec PRIVATE dh_ovl_spec PkgConfig::CMOCKA)
dh_add_test(NAME pairs.spec COMMAND pairs_test_spec ${_pairs_profile} LABELS si asan TIMEOUT 30)

add_executable(pairs_check ${_pairs_dir}/check.c)
target_link_libraries(pairs_check PRIVATE PkgConfig::JANSSON)
add_dependencies(pairs_check dhelix-pairs vgpu_all)

function(pairs_vgpu_test name dev)
  dh_add_test(NAME pairs.vgpu.${name}
    COMMAND pairs_check ${MPIEXEC_EXECUTABLE} $<TARGET_FILE:dhelix-pairs> ${_pairs_profile}
            ${CMAKE_CURRENT_BINARY_DIR}/pairs-${name}.json 2 ${ARGN}
    ENV VGPU_DEVICE=${dev} VGPU_HAZARD=abort VGPU_COMM_TIMEOUT=30
    LABELS si VGPU TIMEOUT 120)
endfunction()
if(DH_HAVE_MPI) # two ranks under mpiexec (cmake/Dependencies.cmake)
  pairs_vgpu_test(h100 h100)
  pairs_vgpu_test(a800 a800)
  pairs_vgpu_test(gemm_gate h100 --gate-gemm)
  # A first gate far too short: repetitions must be redone with longer ones, same results.
  pairs_vgpu_test(short_gate h100 --gate-us 1)
endif()
