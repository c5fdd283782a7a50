# End-to-end: srudemo trains for a few hundred steps on the shipped sample; its validation BPC must
# fall well below the 8 bits/char of a uniform guess. Run with -DDEMO=<srudemo> -DDATA=<file>.
execute_process(COMMAND ${DEMO} --data ${DATA} --steps 400 --eval-every 100 --seed 3
                OUTPUT_VARIABLE out ERROR_VARIABLE err RESULT_VARIABLE rc)
message("${out}${err}")
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "srudemo exited with ${rc}")
endif()
string(REGEX MATCH "final: valid ([0-9.]+) bpc" _ "${out}")
set(bpc ${CMAKE_MATCH_1})
if(bpc STREQUAL "" OR bpc GREATER 5.5)
  message(FATAL_ERROR "validation BPC '${bpc}' did not fall below 5.5 after 400 steps")
endif()
message("validation BPC ${bpc} < 5.5: the demo learns")
