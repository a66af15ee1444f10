# docs.config: docs/configuration.md must be exactly what `dhelix config --markdown`
# prints, so the documented variables cannot drift from the table in
# preload/common/config.h. With -DUPDATE=1 it rewrites the file instead
# (cmake --build <build> --target docs-config).
# Run as: cmake -DDHELIX=<path> -DDOC=<docs/configuration.md> [-DUPDATE=1] -P ...
cmake_minimum_required(VERSION 3.25)
execute_process(COMMAND env -i ${DHELIX} config --markdown
                RESULT_VARIABLE rc OUTPUT_VARIABLE generated ERROR_VARIABLE err)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "dhelix config --markdown failed (${rc}): ${err}")
endif()
if(UPDATE)
  file(WRITE "${DOC}" "${generated}")
  message(STATUS "wrote ${DOC}")
  return()
endif()
if(NOT EXISTS "${DOC}")
  message(FATAL_ERROR "${DOC} is missing; generate it with: cmake --build <build> --target docs-config")
endif()
file(READ "${DOC}" documented)
if(NOT documented STREQUAL generated)
  set(tmp "${CMAKE_CURRENT_BINARY_DIR}/configuration.generated.md")
  file(WRITE "${tmp}" "${generated}")
  execute_process(COMMAND diff -u "${DOC}" "${tmp}" OUTPUT_VARIABLE diff)
  message(FATAL_ERROR "${DOC} differs from `dhelix config --markdown`:\n${diff}\n"
                      "Regenerate it with: cmake --build <build> --target docs-config")
endif()
message(STATUS "docs.config: ${DOC} matches the generator")
