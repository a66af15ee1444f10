# Planner tests (scheduler/plan): the alignment DP against brute force, plan and profile
# files, iteration and phase detection, the memory model, the time model, the proof of moves
# across communicators, planning speed, and the CLI (plan, show, validate).
# Labels: plan and si; asan for the unit tests (plan.speed is a timing and stays out of it).
if(TARGET dh_plan)
  set(_plan_dir ${CMAKE_CURRENT_SOURCE_DIR}/plan)
  add_library(plan_synth_lib STATIC ${_plan_dir}/synth.c)
  target_include_directories(plan_synth_lib PUBLIC ${_plan_dir})
  target_link_libraries(plan_synth_lib PUBLIC dh_plan)

  foreach(t dp io phases variants memsim moves timesim)
    add_executable(plan_test_${t} ${_plan_dir}/test_${t}.c)
    target_link_libraries(plan_test_${t} PRIVATE plan_synth_lib dh_plan PkgConfig::CMOCKA m)
  endforeach()
  dh_add_test(NAME plan.dp COMMAND plan_test_dp LABELS plan si asan TIMEOUT 120)
  dh_add_test(NAME plan.io COMMAND plan_test_io LABELS plan si asan TIMEOUT 60)
  dh_add_test(NAME plan.phases COMMAND plan_test_phases LABELS plan si asan TIMEOUT 60)
  dh_add_test(NAME plan.variants COMMAND plan_test_variants LABELS plan si asan TIMEOUT 60)
  dh_add_test(NAME plan.memsim COMMAND plan_test_memsim LABELS plan si asan TIMEOUT 60)
  dh_add_test(NAME plan.moves COMMAND plan_test_moves LABELS plan si asan TIMEOUT 60)
  dh_add_test(NAME plan.timesim COMMAND plan_test_timesim LABELS plan si asan TIMEOUT 60)

  add_executable(plan_test_speed ${_plan_dir}/test_speed.c)
  target_link_libraries(plan_test_speed PRIVATE plan_synth_lib dh_plan m)
  dh_add_test(NAME plan.speed COMMAND plan_test_speed LABELS plan si TIMEOUT 180)

  # plan_synth: writes synthetic profiles for the CLI test.
  add_executable(plan_synth ${_plan_dir}/gen.c)
  target_link_libraries(plan_synth PRIVATE plan_synth_lib)
  find_program(DH_RSVG_CONVERT rsvg-convert)
  dh_add_test(NAME plan.cli
    COMMAND ${CMAKE_COMMAND} -DDHELIX=$<TARGET_FILE:dhelix> -DSYNTH=$<TARGET_FILE:plan_synth>
            -DRSVG=${DH_RSVG_CONVERT} -DWORK=${CMAKE_CURRENT_BINARY_DIR}/plan_cli
            -P ${_plan_dir}/cli_plan.cmake
    LABELS plan si asan TIMEOUT 120)
endif()
