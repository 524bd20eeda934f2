# Fixture of torch.ddp_generated: a fresh DIR holding the generated cases.
#   cmake -DSIM=path/to/infonce-sim -DDIR=out/dir -DCASES=K -P export_generated.cmake
cmake_minimum_required(VERSION 3.25)
file(REMOVE_RECURSE ${DIR})
execute_process(COMMAND ${SIM} export --seed 2026 --cases ${CASES} --limits typical
                        --mesh 2/2,4/2,4/4,8/4 --compensate both --padding both ${DIR}
                RESULT_VARIABLE code OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT code EQUAL 0)
  message(FATAL_ERROR "infonce-sim export exited ${code}: ${err}")
endif()
message(STATUS "${out}")
