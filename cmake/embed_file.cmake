# cmake -DIN=FILE -DOUT=FILE.inc -P embed_file.cmake
# Writes FILE's bytes as a comma-separated list of char literals, to be
# #included inside a `const char x[] = { ... };` initializer (the web UI
# assets are embedded in the binary this way; src/server/webui.cpp).
if(NOT IN OR NOT OUT)
  message(FATAL_ERROR "embed_file.cmake: set -DIN=... -DOUT=...")
endif()
file(READ "${IN}" _hex HEX)
# 32 bytes per line keeps the generated file readable in a diff or an error message.
string(REGEX REPLACE "(................................................................)" "\\1\n" _hex "${_hex}")
string(REGEX REPLACE "([0-9a-f][0-9a-f])" "'\\\\x\\1'," _bytes "${_hex}")
get_filename_component(_name "${IN}" NAME)
file(WRITE "${OUT}" "// Generated from ${_name} by cmake/embed_file.cmake; do not edit.\n${_bytes}\n")
