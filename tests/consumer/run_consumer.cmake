# Installs the built sage2 into a scratch prefix, then configures, builds and runs
# tests/consumer against it. Invoked by CTest with -DBUILD_DIR, -DSOURCE_DIR, -DWORK_DIR.
file(REMOVE_RECURSE "${WORK_DIR}")
execute_process(COMMAND ${CMAKE_COMMAND} --install "${BUILD_DIR}" --prefix "${WORK_DIR}/prefix"
                RESULT_VARIABLE r OUTPUT_QUIET)
if(r)
  message(FATAL_ERROR "cmake --install failed: ${r}")
endif()
execute_process(COMMAND ${CMAKE_COMMAND} -S "${SOURCE_DIR}/tests/consumer" -B "${WORK_DIR}/build"
                        "-DCMAKE_PREFIX_PATH=${WORK_DIR}/prefix" -DCMAKE_BUILD_TYPE=Release
                RESULT_VARIABLE r OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(r)
  message(FATAL_ERROR "configuring the consumer failed:\n${out}\n${err}")
endif()
execute_process(COMMAND ${CMAKE_COMMAND} --build "${WORK_DIR}/build" RESULT_VARIABLE r OUTPUT_VARIABLE out
                ERROR_VARIABLE err)
if(r)
  message(FATAL_ERROR "building the consumer failed:\n${out}\n${err}")
endif()
foreach(exe consumer consumer_static)
  execute_process(COMMAND "${WORK_DIR}/build/${exe}" RESULT_VARIABLE r OUTPUT_VARIABLE out ERROR_VARIABLE err)
  message(STATUS "${exe}: ${out}${err}")
  if(r)
    message(FATAL_ERROR "${exe} exited with ${r}")
  endif()
endforeach()
