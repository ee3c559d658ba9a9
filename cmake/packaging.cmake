# cmake/packaging.cmake — the Debian packages (`make package`, CPack's DEB
# generator), one per install component of CMakeLists.txt:
#   libcstream0     runtime: libcstream.so.0 and its real file
#   libcstream-dev  development: headers, libcstream.a, the libcstream.so
#                   link, cstream.pc
# The package name carries the soname's number (Debian's rule for libraries),
# so it changes when the soname does (see docs/guide.md, "Installing").
# `make package` configures its own build with CMAKE_INSTALL_PREFIX=/usr, so
# GNUInstallDirs picks the multiarch libdir (lib/x86_64-linux-gnu).

set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME cstream)
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGE_VENDOR "cstream")
set(CPACK_PACKAGE_CONTACT "cstream maintainers <maintainers@users.noreply.a-seed-52d32187.example>")
# No CPACK_PACKAGE_DESCRIPTION_SUMMARY: CPackDeb would put it in front of
# each component's description, and each package has a synopsis of its own.
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
# cmake/cstream-pc.cmake reads the prefix at install time: with DESTDIR it is
# /usr, where without it CPack would hand it its staging directory.
set(CPACK_SET_DESTDIR ON)
set(CPACK_INSTALL_PREFIX /usr)
set(CPACK_STRIP_FILES ON)

set(CPACK_DEB_COMPONENT_INSTALL ON)
set(CPACK_COMPONENTS_ALL runtime development)
set(CPACK_DEBIAN_PACKAGE_RELEASE 1)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT) # <name>_<version>-<release>_<arch>.deb
set(CPACK_DEBIAN_PACKAGE_MAINTAINER "${CPACK_PACKAGE_CONTACT}")
set(CPACK_DEBIAN_PACKAGE_PRIORITY optional)
set(cstream_deb_version "${PROJECT_VERSION}-${CPACK_DEBIAN_PACKAGE_RELEASE}")

set(CPACK_DEBIAN_RUNTIME_PACKAGE_NAME libcstream0)
set(CPACK_DEBIAN_RUNTIME_PACKAGE_SECTION libs)
# Depends from dpkg-shlibdeps: what libcstream.so.0 links (librdkafka1,
# libyajl2, libmicrohttpd12, libc6), with the versions their symbols need.
set(CPACK_DEBIAN_RUNTIME_PACKAGE_SHLIBDEPS ON)
# A shlibs file: services packaged against 0.x depend on this exact version,
# since the 0.x ABI may change between minor versions. (CPack 3.25 has no
# per-component switch; only libcstream0 holds a shared object.) The ldconfig
# calls in postinst and postrm are CPack's own, for any library in /usr/lib.
set(CPACK_DEBIAN_PACKAGE_GENERATE_SHLIBS ON)
set(CPACK_DEBIAN_PACKAGE_GENERATE_SHLIBS_POLICY "=")
set(CPACK_DEBIAN_RUNTIME_DESCRIPTION
    "C framework for Kafka services - shared library
cstream runs plain C handlers on Kafka records; each handler settles every
delivery (ack, drop, retry, or pending), and the subscription's commit mode
(Auto, Tracked, Transactional) turns settlements into committed positions.
.
This package holds the shared library, libcstream.so.0.")

set(CPACK_DEBIAN_DEVELOPMENT_PACKAGE_NAME libcstream-dev)
set(CPACK_DEBIAN_DEVELOPMENT_PACKAGE_SECTION libdevel)
set(CPACK_DEBIAN_DEVELOPMENT_PACKAGE_DEPENDS
    "libcstream0 (= ${cstream_deb_version}), librdkafka-dev, libyajl-dev, libavro-dev, libprotobuf-c-dev, libmicrohttpd-dev, libcurl4-openssl-dev, libsqlite3-dev, libpq-dev")
set(CPACK_DEBIAN_DEVELOPMENT_DESCRIPTION
    "C framework for Kafka services - development files
cstream runs plain C handlers on Kafka records; each handler settles every
delivery (ack, drop, retry, or pending), and the subscription's commit mode
(Auto, Tracked, Transactional) turns settlements into committed positions.
.
This package holds the headers, the static library and cstream.pc: a service
builds with pkg-config --cflags --libs cstream.")

include(CPack)
