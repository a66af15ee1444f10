# The GPU kit where there is no GPU, label gpukit. gpukit.validate_rehearsal checks
# scripts/gpu-validate's limits, budget and report in --vgpu rehearsals
# (tests/gpu/test_validate.sh). For the Megatron-Core step's script (tests/gpu/mcore_gpt.py):
# gpukit.mcore_self_test checks its logic without torch (argument parsing, the comparison
# that must see a changed loss or parameter); gpukit.mcore_cpu_check trains Megatron-Core's GPT on
# the CPU (gloo) through Megatron's DDP, optimizer and schedule, twice, bit for bit; it
# needs torch and megatron-core, which a fresh clone lacks, so it skips (77) without them.
# scripts/gpu-wheels --cpu-venv makes .venv-mcore/ for it (then re-run cmake);
# DH_MCORE_PYTHON in the environment of cmake names another interpreter.
find_program(DH_PYTHON3 python3)
if(NOT DH_PYTHON3)
  message(STATUS "gpukit: no python3, the gpukit label's tests are not registered")
  return()
endif()
# Not a cache entry: a venv made after the first configure must be found by the next.
if(DEFINED ENV{DH_MCORE_PYTHON})
  set(_mcore_py "$ENV{DH_MCORE_PYTHON}")
elseif(EXISTS "${PROJECT_SOURCE_DIR}/.venv-mcore/bin/python")
  set(_mcore_py "${PROJECT_SOURCE_DIR}/.venv-mcore/bin/python")
else()
  set(_mcore_py "${DH_PYTHON3}")
endif()
set(_mcore ${PROJECT_SOURCE_DIR}/tests/gpu/mcore_gpt.py)
dh_add_test(NAME gpukit.mcore_self_test COMMAND ${DH_PYTHON3} ${_mcore} --self-test LABELS gpukit TIMEOUT 30)
dh_add_test(NAME gpukit.mcore_cpu_check COMMAND ${_mcore_py} ${_mcore} --check LABELS gpukit TIMEOUT 180
  ENV "OMP_NUM_THREADS=1")
dh_add_test(NAME gpukit.validate_rehearsal
  COMMAND ${PROJECT_SOURCE_DIR}/tests/gpu/test_validate.sh ${CMAKE_BINARY_DIR} LABELS gpukit TIMEOUT 300)
