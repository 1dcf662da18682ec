# Installs the built sage2 into a scratch prefix, then configures and builds examples/cpp against
# it (what a user does with -DCMAKE_PREFIX_PATH). Invoked by CTest with -DBUILD_DIR, -DSOURCE_DIR,
# -DWORK_DIR and -DCUDA_ROOT (the toolkit the library was built with); the test sage2_example_cpp then runs WORK_DIR/build/sage2_example.
file(REMOVE_RECURSE "${WORK_DIR}")
execute_process(COMMAND ${CMAKE_COMMAND} --install "${BUILD_DIR}" --prefix "${WORK_DIR}/prefix"
                RESULT_VARIABLE r OUTPUT_QUIET)
if(r)
  message(FATAL_ERROR "cmake --install failed: ${r}")
endif()
execute_process(COMMAND ${CMAKE_COMMAND} -S "${SOURCE_DIR}/examples/cpp" -B "${WORK_DIR}/build"
                        "-DCMAKE_PREFIX_PATH=${WORK_DIR}/prefix" "-DCUDAToolkit_ROOT=${CUDA_ROOT}"
                        -DCMAKE_BUILD_TYPE=Release
                RESULT_VARIABLE r OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(r)
  message(FATAL_ERROR "configuring examples/cpp failed:\n${out}\n${err}")
endif()
execute_process(COMMAND ${CMAKE_COMMAND} --build "${WORK_DIR}/build" RESULT_VARIABLE r OUTPUT_VARIABLE out
                ERROR_VARIABLE err)
if(r)
  message(FATAL_ERROR "building examples/cpp failed:\n${out}\n${err}")
endif()
