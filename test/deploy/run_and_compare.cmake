# cmake -DDEPLOYABLE=prog -DCHECK=checker -DMODEL=m.onnx -DDEPLOYED=m.deploy -DDIMS=k=v -DOUT=out.raw -P this file
# Runs the deployable on its deployment model (inputs by the benchmark rule, its first output saved raw), then the
# full library on the ONNX model with the same inputs, and compares.
execute_process(COMMAND ${DEPLOYABLE} ${DEPLOYED} --runs 3 --save ${OUT} RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "the deployable failed (${rc})")
endif()
execute_process(COMMAND ${CHECK} ${MODEL} ${OUT} ${DIMS} RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "the deployable's outputs differ from the full library's")
endif()
