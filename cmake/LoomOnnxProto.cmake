# loom_onnx_proto(TARGET): adds to TARGET the C++ code protoc generates from libonnx-dev's
# onnx.proto with its package renamed to loom.onnx_proto (so that a program linking libonnx too
# has one onnx::ModelProto), in ${CMAKE_CURRENT_BINARY_DIR}/loom/deploy/onnx.pb.{h,cc}. The main
# build and the fuzz build (tests/fuzz) both use it.
function(loom_onnx_proto target)
  find_file(LOOM_ONNX_PROTO onnx/onnx.proto REQUIRED DOC "onnx.proto of libonnx-dev")
  set(out ${CMAKE_CURRENT_BINARY_DIR})
  file(READ ${LOOM_ONNX_PROTO} onnx_proto)
  string(REPLACE "package onnx;" "package loom.onnx_proto;" onnx_proto "${onnx_proto}")
  file(WRITE ${out}/onnx_proto.tmp "${onnx_proto}")
  configure_file(${out}/onnx_proto.tmp ${out}/loom/deploy/onnx.proto COPYONLY)  # rewritten when it changes
  set(generated ${out}/loom/deploy/onnx.pb.cc ${out}/loom/deploy/onnx.pb.h)
  add_custom_command(OUTPUT ${generated}
                     COMMAND protobuf::protoc --cpp_out=${out} -I ${out} ${out}/loom/deploy/onnx.proto
                     DEPENDS ${out}/loom/deploy/onnx.proto protobuf::protoc
                     COMMENT "Generating the ONNX protocol buffer code")
  target_sources(${target} PRIVATE ${generated})
  target_include_directories(${target} PRIVATE $<BUILD_INTERFACE:${out}>)
endfunction()
