# cmake/embed-text.cmake — writes a text file as a C array:
#   cmake -DIN=file.proto -DOUT=file.proto.c -DSYMBOL=name -P embed-text.cmake
# gives `const char name[] = {0x.., ..., 0x00};` (the text, NUL-terminated).
file(READ ${IN} hex HEX)
string(REGEX REPLACE "([0-9a-f][0-9a-f])" "0x\\1," bytes "${hex}")
file(WRITE ${OUT} "/* generated from ${IN} by cmake/embed-text.cmake */\nconst char ${SYMBOL}[] = {${bytes}0x00};\n")
