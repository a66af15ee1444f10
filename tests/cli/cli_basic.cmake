# cli.basic: `dhelix` as a user meets it: --version, help, usage errors (exit 1),
# subcommands that are not there yet (exit 2), plan/show/validate without arguments (exit
# 1), and `config` in its three formats with values from the environment, a bad value and
# the mode derived from DHELIX_PLAN.
# Run as: cmake -DDHELIX=<path> -DVERSION=<x.y.z> -P cli_basic.cmake
cmake_minimum_required(VERSION 3.25)

# Runs the CLI in a clean environment plus the given VAR=value words; checks the exit
# status; leaves stdout and stderr in OUT and ERR.
function(dh_cli expect_rc)
  set(envs)
  set(args)
  foreach(a ${ARGN})
    if(a MATCHES "^[A-Z_]+=")
      list(APPEND envs "${a}")
    else()
      list(APPEND args "${a}")
    endif()
  endforeach()
  execute_process(COMMAND env -i ${envs} ${DHELIX} ${args}
                  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL expect_rc)
    message(FATAL_ERROR "dhelix ${ARGN}: exit ${rc}, expected ${expect_rc}\n"
                        "stdout:\n${out}\nstderr:\n${err}")
  endif()
  set(OUT "${out}" PARENT_SCOPE)
  set(ERR "${err}" PARENT_SCOPE)
endfunction()

function(dh_expect what regex text)
  if(NOT text MATCHES "${regex}")
    message(FATAL_ERROR "${what}: expected to match '${regex}', got:\n${text}")
  endif()
endfunction()

# The JSON row of variable name: sets VALUE and SOURCE.
function(dh_json_row json name)
  string(JSON n LENGTH "${json}" rows)
  math(EXPR last "${n} - 1")
  foreach(i RANGE ${last})
    string(JSON row_name GET "${json}" rows ${i} name)
    if(row_name STREQUAL name)
      string(JSON v GET "${json}" rows ${i} value)
      string(JSON s GET "${json}" rows ${i} source)
      set(VALUE "${v}" PARENT_SCOPE)
      set(SOURCE "${s}" PARENT_SCOPE)
      return()
    endif()
  endforeach()
  message(FATAL_ERROR "no row ${name} in ${json}")
endfunction()

dh_cli(0 --version)
if(NOT OUT STREQUAL "dhelix ${VERSION}\n")
  message(FATAL_ERROR "--version printed '${OUT}', expected 'dhelix ${VERSION}'")
endif()

dh_cli(0 help)
foreach(cmd config plan show validate profile-pairs bench help)
  dh_expect("help lists ${cmd}" "\n  ${cmd} " "${OUT}")
endforeach()
dh_expect("help marks bench" "\n  bench [^\n]*not available yet" "${OUT}")
foreach(cmd config plan show validate)
  dh_expect("help does not mark ${cmd}" "\n  ${cmd} [^\n(]*\n" "${OUT}")
endforeach()
dh_cli(0 --help)

dh_cli(1)
dh_expect("usage without a command" "usage: dhelix" "${ERR}")
dh_cli(1 frobnicate)
dh_expect("unknown command" "unknown command 'frobnicate'" "${ERR}")
dh_cli(1 config --bogus)
dh_cli(1 config --json --markdown)
dh_cli(2 bench)
dh_expect("bench" "dhelix bench: not available yet" "${ERR}")
# profile-pairs runs dhelix-pairs beside the CLI (tests/pairs.cmake tests that program,
# which needs the CUDA libraries on its path; this clean environment has none).
# plan, show and validate exist (tests/plan/cli_plan.cmake tests them); without their
# arguments they are usage errors.
dh_cli(1 plan)
dh_expect("plan without profiles" "dhelix plan: no profile given" "${ERR}")
dh_cli(1 show)
dh_expect("show without a plan" "dhelix show: no plan given" "${ERR}")
dh_cli(1 validate)
dh_expect("validate without a plan" "dhelix validate: no plan given" "${ERR}")

dh_cli(0 config)
dh_expect("config text" "\nDHELIX_MODE +passthrough +default +passthrough\n" "${OUT}")
dh_expect("config text" "\nDHELIX_MAX_DEFERRED_FREE_BYTES +2G +default +2G\n" "${OUT}")
if(NOT ERR STREQUAL "")
  message(FATAL_ERROR "config in a clean environment warned:\n${ERR}")
endif()

dh_cli(0 DHELIX_PLAN=p.json DHELIX_LOG=debug DHELIX_SEED=x config --json)
dh_json_row("${OUT}" DHELIX_LOG)
if(NOT VALUE STREQUAL "debug" OR NOT SOURCE STREQUAL "env")
  message(FATAL_ERROR "DHELIX_LOG: '${VALUE}' from '${SOURCE}', expected debug from env")
endif()
dh_json_row("${OUT}" DHELIX_SEED)
if(NOT VALUE STREQUAL "0" OR NOT SOURCE STREQUAL "default (invalid env)")
  message(FATAL_ERROR "DHELIX_SEED: '${VALUE}' from '${SOURCE}'")
endif()
dh_json_row("${OUT}" DHELIX_MODE)
if(NOT VALUE STREQUAL "plan" OR NOT SOURCE STREQUAL "derived")
  message(FATAL_ERROR "DHELIX_MODE: '${VALUE}' from '${SOURCE}', expected plan, derived")
endif()
dh_expect("bad value warning" "WARN conf: DHELIX_SEED=x: not an integer; using the default '0'"
          "${ERR}")

dh_cli(0 config --markdown)
dh_expect("markdown" "^<!--" "${OUT}")
dh_expect("markdown" "\n\\| `DHELIX_MODE` \\| enum \\| `passthrough` \\|" "${OUT}")
message(STATUS "cli.basic: all checks passed")
