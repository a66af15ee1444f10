# fuzz.*: the checked-in corpora of the plan and profile parsers (tests/fuzz/corpus: the
# hand-written seeds and the inputs scripts/fuzz found) replayed through the same fuzz
# targets without libFuzzer, under this build's compiler and sanitizers. The fuzzing itself
# is scripts/fuzz (clang, libFuzzer; too long for CI). Until scheduler/plan provides
# dh_plan there is nothing to replay.
if(TARGET dh_plan)
  set(_fuzz_dir ${CMAKE_CURRENT_SOURCE_DIR}/fuzz)
  foreach(t plan profile)
    add_executable(fuzz_replay_${t} ${_fuzz_dir}/replay.c ${_fuzz_dir}/fuzz_${t}.c
                   ${_fuzz_dir}/fuzz_common.c)
    target_include_directories(fuzz_replay_${t} PRIVATE ${_fuzz_dir}
                               ${PROJECT_SOURCE_DIR}/scheduler)
    target_link_libraries(fuzz_replay_${t} PRIVATE dh_plan dh::common)
    dh_add_test(NAME fuzz.${t}_corpus
                COMMAND fuzz_replay_${t} --timeout 10 ${_fuzz_dir}/corpus/${t}
                LABELS si fuzz asan TIMEOUT 120)
  endforeach()
endif()
