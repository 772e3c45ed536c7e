# Embeds a file in C++ as a byte array (the chat page of the server):
#   cmake -DINPUT=file -DOUTPUT=file.inc -DNAME=kName -P cmake/EmbedFile.cmake
# writes `static const unsigned char kName[]` and `kName_size`.
file(READ "${INPUT}" _hex HEX)
string(REGEX REPLACE "([0-9a-f][0-9a-f])" "0x\\1," _bytes "${_hex}")
get_filename_component(_name "${INPUT}" NAME)
file(WRITE "${OUTPUT}"
  "// Generated from ${_name} by cmake/EmbedFile.cmake at build time: do not edit.\n"
  "#pragma once\n#include <cstddef>\n"
  "static const unsigned char ${NAME}[] = {${_bytes}0x00};\n"
  "static const std::size_t ${NAME}_size = sizeof(${NAME}) - 1;\n")
