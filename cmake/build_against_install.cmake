# Installs the built sage2 (BUILD_DIR) into WORK_DIR/prefix, then configures and builds the CMake
# project PROJECT_DIR against it in WORK_DIR/build (what a user does with -DCMAKE_PREFIX_PATH), and
# runs the programs named in RUN (comma-separated; empty: build only). CUDA_ROOT, when given, is passed on as
# CUDAToolkit_ROOT. Invoked by CTest (tests/CMakeLists.txt): tests/consumer (built and run) and
# examples/cpp (built; its program is a test of its own).
file(REMOVE_RECURSE "${WORK_DIR}")
execute_process(COMMAND ${CMAKE_COMMAND} --install "${BUILD_DIR}" --prefix "${WORK_DIR}/prefix"
                RESULT_VARIABLE r OUTPUT_QUIET)
if(r)
  message(FATAL_ERROR "cmake --install failed: ${r}")
endif()
set(extra)
if(CUDA_ROOT)
  list(APPEND extra "-DCUDAToolkit_ROOT=${CUDA_ROOT}")
endif()
execute_process(COMMAND ${CMAKE_COMMAND} -S "${PROJECT_DIR}" -B "${WORK_DIR}/build"
                        "-DCMAKE_PREFIX_PATH=${WORK_DIR}/prefix" -DCMAKE_BUILD_TYPE=Release ${extra}
                RESULT_VARIABLE r OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(r)
  message(FATAL_ERROR "configuring ${PROJECT_DIR} failed:\n${out}\n${err}")
endif()
execute_process(COMMAND ${CMAKE_COMMAND} --build "${WORK_DIR}/build" RESULT_VARIABLE r OUTPUT_VARIABLE out
                ERROR_VARIABLE err)
if(r)
  message(FATAL_ERROR "building ${PROJECT_DIR} failed:\n${out}\n${err}")
endif()
string(REPLACE "," ";" run_list "${RUN}")
foreach(exe IN LISTS run_list)
  execute_process(COMMAND "${WORK_DIR}/build/${exe}" RESULT_VARIABLE r OUTPUT_VARIABLE out ERROR_VARIABLE err)
  message(STATUS "${exe}: ${out}${err}")
  if(r)
    message(FATAL_ERROR "${exe} exited with ${r}")
  endif()
endforeach()
