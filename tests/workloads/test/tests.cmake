# workloads.*: one CTest entry per scenario of wl_check (test/wl_check.c says what each
# judges). All run on the vgpu with VGPU_HAZARD=abort: a race ends the run (status 86).
set(_wl_env VGPU_HAZARD=abort VGPU_COMM_TIMEOUT=30)

function(wl_test name scenario timeout)
  dh_add_test(NAME workloads.${name}
    COMMAND $<TARGET_FILE:wl_check> ${scenario} ${MPIEXEC_EXECUTABLE} $<TARGET_FILE:workload>
    ENV ${_wl_env} ${ARGN} LABELS workloads VGPU TIMEOUT ${timeout})
endfunction()

# wl_check starts the workload under mpiexec, mostly with several ranks: with MPI only
# (cmake/Dependencies.cmake).
if(DH_HAVE_MPI)
  # Real math, tiny shapes.
  wl_test(loss.gpt loss-gpt 60)
  wl_test(loss.llama loss-llama 60)
  wl_test(gradcheck.gpt gradcheck-gpt 60)
  wl_test(gradcheck.llama gradcheck-llama 60)
  wl_test(gradcheck.moe gradcheck-moe 60)
  wl_test(repeat repeat 60)
  # Multi-rank runs (2-8 ranks) against the one-rank run.
  wl_test(tp tp 60)
  wl_test(tp_nosp tp-nosp 60)
  wl_test(pp pp 60)
  wl_test(pp_tp pp-tp 60)
  wl_test(cp cp 60)
  wl_test(dp dp 60)
  wl_test(ep ep 60)
  wl_test(mixed mixed 90)
  wl_test(split_current split-current 90)

  # Megatron's interleaved 1F1B (--vpp) against the non-interleaved schedule, bit for bit,
  # without and (the shim's stress mode, two seeds) with the shim.
  foreach(v vpp-pp2-tp2 vpp-pp2-v4 vpp-pp4 vpp-pp4-nooverlap vpp-pp4-tp2 vpp-pp4-tp2-nooverlap vpp-dp)
    dh_add_test(NAME workloads.${v}
      COMMAND $<TARGET_FILE:wl_check> ${v} ${MPIEXEC_EXECUTABLE} $<TARGET_FILE:workload>
              $<TARGET_FILE:dhelix_shim>
      ENV ${_wl_env} LABELS workloads VGPU TIMEOUT 90)
  endforeach()
  wl_test(vpp_refused vpp-refused 60)
  wl_test(preset_vpp.gpt-30b-a40 preset-vpp:gpt-30b-a40 120)

  # The paper's configurations, timing-only with representative ranks.
  foreach(p llama-8b-a40 llama-25b-a40 llama-39b-a40 gpt-6.7b-a40 gpt-18b-a40 gpt-30b-a40
            llama-66b-16k-a800 llama-66b-32k-a800)
    wl_test(preset.${p} preset:${p} 120)
  endforeach()
endif()

# Emulated communication on one device (src/emucomm.h, --emulate-comm) with and without
# the shim, and the profile -> plan -> SI path over it: test/wl_emu_check.c says what each
# checks. tests/gpu.cmake runs them on a GPU.
add_executable(wl_emu_check ${CMAKE_CURRENT_SOURCE_DIR}/test/wl_emu_check.c)
target_link_libraries(wl_emu_check PRIVATE PkgConfig::JANSSON m)
add_dependencies(wl_emu_check workload dhelix_shim dhelix)
dh_add_test(NAME workloads.emulate_comm
  COMMAND $<TARGET_FILE:wl_emu_check> vgpu emulate $<TARGET_FILE:workload> $<TARGET_FILE:dhelix_shim>
  ENV ${_wl_env} LABELS workloads VGPU TIMEOUT 180)
dh_add_test(NAME workloads.emulate_plan
  COMMAND $<TARGET_FILE:wl_emu_check> vgpu plan $<TARGET_FILE:workload> $<TARGET_FILE:dhelix_shim>
          $<TARGET_FILE:dhelix>
  ENV ${_wl_env} LABELS workloads VGPU TIMEOUT 180)
