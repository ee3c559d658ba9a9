# cmake/cstream-pc.cmake — writes cstream.pc at install time (install(CODE) in
# CMakeLists.txt sets the inputs). CMAKE_INSTALL_PREFIX here is the prefix of
# this install, which `cmake --install --prefix DIR` and CPack (/usr) set
# after configure, so the file names where the library really goes.
# In: CSTREAM_PC_IN, CSTREAM_PC_OUT, PROJECT_VERSION, CMAKE_INSTALL_LIBDIR,
# CMAKE_INSTALL_INCLUDEDIR (relative to the prefix, or absolute).
string(REGEX REPLACE "(.)/+$" "\\1" prefix "${CMAKE_INSTALL_PREFIX}")
foreach(dir LIBDIR INCLUDEDIR)
  if(IS_ABSOLUTE "${CMAKE_INSTALL_${dir}}")
    set(PC_${dir} "${CMAKE_INSTALL_${dir}}")
  else()
    set(PC_${dir} "\${prefix}/${CMAKE_INSTALL_${dir}}")
  endif()
endforeach()
set(PC_PREFIX "${prefix}")
configure_file("${CSTREAM_PC_IN}" "${CSTREAM_PC_OUT}" @ONLY)
