# cmake/protoc-c.cmake — C from a .proto with protoc-c at build time (the
# generated code is never committed), and a .proto's text embedded as a C
# string (protobuf-c cannot parse .proto text at run time; a schema registry
# needs it). Needs PkgConfig::PROTOBUFC (libprotobuf-c) defined first.
find_program(PROTOC_C_EXECUTABLE protoc-c REQUIRED) # Debian protobuf-c-compiler
set(CSTREAM_EMBED_TEXT_SCRIPT ${CMAKE_CURRENT_LIST_DIR}/embed-text.cmake)

# cstream_proto_library(<target> <file.proto> <symbol>): a static library
# of protoc-c's <file>.pb-c.c (include "<file>.pb-c.h") plus <file>.proto.c,
# which defines `const char <symbol>[]`, the .proto's text NUL-terminated.
function(cstream_proto_library target proto symbol)
  get_filename_component(proto ${proto} ABSOLUTE)
  get_filename_component(dir ${proto} DIRECTORY)
  get_filename_component(stem ${proto} NAME_WE)
  set(out ${CMAKE_CURRENT_BINARY_DIR}/proto-${target})
  file(MAKE_DIRECTORY ${out})
  add_custom_command(
    OUTPUT ${out}/${stem}.pb-c.c ${out}/${stem}.pb-c.h
    COMMAND ${PROTOC_C_EXECUTABLE} --c_out=${out} --proto_path=${dir} ${proto}
    DEPENDS ${proto}
    COMMENT "protoc-c ${stem}.proto"
    VERBATIM)
  add_custom_command(
    OUTPUT ${out}/${stem}.proto.c
    COMMAND ${CMAKE_COMMAND} -DIN=${proto} -DOUT=${out}/${stem}.proto.c -DSYMBOL=${symbol} -P
            ${CSTREAM_EMBED_TEXT_SCRIPT}
    DEPENDS ${proto} ${CSTREAM_EMBED_TEXT_SCRIPT}
    VERBATIM)
  add_library(${target} STATIC ${out}/${stem}.pb-c.c ${out}/${stem}.proto.c)
  target_include_directories(${target} PUBLIC ${out})
  target_link_libraries(${target} PUBLIC PkgConfig::PROTOBUFC)
endfunction()
