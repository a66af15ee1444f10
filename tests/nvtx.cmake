# NVTX (issue 26), label "nvtx": the shim's stream names, pair ranges and auto mode's phases,
# as the vgpu's trace shows them (tests/nvtx/trace.sh). Runs the demo's 4-rank job.
if(DH_HAVE_MPI)
  dh_add_test(NAME nvtx.trace
    COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/nvtx/trace.sh
    ENV DH_SRC=${PROJECT_SOURCE_DIR} DH_BUILD_DIR=${CMAKE_BINARY_DIR}
        WORK=${CMAKE_BINARY_DIR}/nvtx-test
    LABELS nvtx si TIMEOUT 180)
endif()
