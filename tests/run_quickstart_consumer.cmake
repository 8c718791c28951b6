# Installs soaheap into a scratch prefix, then builds and runs examples/quickstart, a consumer project
# that uses find_package(soaheap).
file(REMOVE_RECURSE ${WORK_DIR})
set(prefix ${WORK_DIR}/prefix)
foreach(step
    "${CMAKE_COMMAND};-S;${SOURCE_DIR};-B;${WORK_DIR}/lib;-G;${GENERATOR};-DSOAHEAP_CUDA=OFF;-DSOAHEAP_BUILD_TESTS=OFF;-DSOAHEAP_BUILD_EXAMPLES=OFF;-DCMAKE_INSTALL_PREFIX=${prefix}"
    "${CMAKE_COMMAND};--build;${WORK_DIR}/lib;--target;soaheap_base;soaheap_config;soaheap_profiler"
    "${CMAKE_COMMAND};--install;${WORK_DIR}/lib"
    "${CMAKE_COMMAND};-S;${SOURCE_DIR}/examples/quickstart;-B;${WORK_DIR}/consumer;-G;${GENERATOR};-DCMAKE_PREFIX_PATH=${prefix}"
    "${CMAKE_COMMAND};--build;${WORK_DIR}/consumer"
    "${WORK_DIR}/consumer/consumer")
  execute_process(COMMAND ${step} RESULT_VARIABLE result OUTPUT_VARIABLE output ERROR_VARIABLE output)
  if(NOT result EQUAL 0)
    message(FATAL_ERROR "step failed (${result}): ${step}\n${output}")
  endif()
endforeach()
message(STATUS "consumer output: ${output}")
