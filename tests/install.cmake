# Installing and launching as a user does (issue 26), label "install":
#   install.tree   cmake --install into a temporary prefix, the demo's SI step from it
#   install.cli    `dhelix run`'s options and environment (python/dhelix/cli.py)
#   install.wheel  pip wheel + a fresh venv + `dhelix run --auto -- <the job under mpirun>`
#                  (skips, 77, where pip cannot reach scikit-build-core)
# tree and wheel run the demo's 4-rank job, so they need MPI. The scratch directories are in the
# build tree.
if(DH_HAVE_MPI)
  dh_add_test(NAME install.tree
    COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/install/tree.sh
    ENV DH_SRC=${PROJECT_SOURCE_DIR} DH_BUILD_DIR=${CMAKE_BINARY_DIR}
        WORK=${CMAKE_BINARY_DIR}/install-test/tree
    LABELS install TIMEOUT 180)
  dh_add_test(NAME install.wheel
    COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/install/wheel.sh
    ENV DH_SRC=${PROJECT_SOURCE_DIR} DH_BUILD_DIR=${CMAKE_BINARY_DIR}
        WORK=${CMAKE_BINARY_DIR}/install-test/wheel
    LABELS install TIMEOUT 600)
endif()
# `dhelix run`'s options and environment from the source tree (no package built).
dh_add_test(NAME install.cli
  COMMAND python3 ${CMAKE_CURRENT_SOURCE_DIR}/install/test_cli.py ${PROJECT_SOURCE_DIR}
          ${CMAKE_BINARY_DIR}/install-test/cli
  LABELS install TIMEOUT 30)
