# What `cmake --install` puts under the prefix, and the Debian packages CPack makes of it.
#
#   bin/pairperf                         the command (component runtime, package pairperf)
#   libexec/pairperf/report              `pairperf report`'s script (runtime), which starts
#   libexec/pairperf/explain-catalog.json  `pairperf explain`'s signatures (runtime)
#   libexec/pairperf/explain-formats.json  the libraries' message formats explain reads (generated)
#   share/pairperf/python/pairperf_tools  the tools' Python package (runtime)
#   libexec/pairperf/pairperf-mpi        `pairperf mesh` under mpirun/srun (component mpi, package
#                                        pairperf-mpi: Open MPI's libraries stay optional)
#   share/pairperf/schemas/*.json        the JSON schemas of every document pairperf and its tools
#                                        write (runtime)
#   share/man/man1/pairperf*.1.gz        man pages generated from the --help texts (runtime)
#   share/doc/pairperf/README.md, docs/ the front door and the reference pages it links to (runtime)
# The binary finds libexec/pairperf relative to itself (PAIRPERF_LIBEXEC_REL), so the prefix can
# change at install time and a copied tree still works; no build or source path is compiled in.

install(PROGRAMS scripts/report DESTINATION ${PAIRPERF_INSTALL_LIBEXECDIR} COMPONENT runtime)
install(FILES diagnose/explain-catalog.json diagnose/explain-formats.json DESTINATION ${PAIRPERF_INSTALL_LIBEXECDIR} COMPONENT runtime)
install(DIRECTORY python/pairperf_tools DESTINATION ${CMAKE_INSTALL_DATADIR}/pairperf/python COMPONENT runtime
        FILES_MATCHING PATTERN "*.py" PATTERN "__pycache__" EXCLUDE)
file(GLOB _schemas CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/results/*schema.json)
install(FILES ${_schemas} DESTINATION ${CMAKE_INSTALL_DATADIR}/pairperf/schemas COMPONENT runtime)
install(FILES README.md DESTINATION ${CMAKE_INSTALL_DOCDIR} COMPONENT runtime)
install(DIRECTORY docs DESTINATION ${CMAKE_INSTALL_DOCDIR} COMPONENT runtime FILES_MATCHING PATTERN "*.md")

# Man pages: help2man runs the built binary's --help for the command and each subcommand.
find_program(PAIRPERF_HELP2MAN help2man)
find_program(PAIRPERF_GZIP gzip)
if(PAIRPERF_HELP2MAN AND PAIRPERF_GZIP)
  set(_pages)
  set(_names
    "pairperf|latency and bandwidth between two endpoints"
    "run|measure a matrix of cases against a pairperf server"
    "server|serve pairperf clients on the control port"
    "info|interfaces, RDMA devices, GPUs and transports of this host"
    "doctor|which interface reaches a server, fast path or fallback"
    "compare|regressions of new runs against a baseline of runs"
    "export|pairperf results as Bencher Metric Format"
    "history|change points over a series of runs, the newest runs judged"
    "report|pictures and an index.html from pairperf results"
    "explain|from an application's failure logs to the cause and the check that proves it"
    "mesh|all pairs of many nodes")
  foreach(_entry IN LISTS _names)
    string(REPLACE "|" ";" _parts "${_entry}")
    list(GET _parts 0 _cmd)
    list(GET _parts 1 _what)
    if(_cmd STREQUAL "pairperf")
      set(_stem pairperf)
      set(_page pairperf.1)
      set(_help "--help")
    else()
      set(_stem pairperf-${_cmd})
      set(_page pairperf-${_cmd}.1)
      set(_help "${_cmd} --help")
    endif()
    string(TOUPPER ${_stem} _title)
    add_custom_command(
      OUTPUT ${PROJECT_BINARY_DIR}/man/${_page}.gz
      COMMAND ${CMAKE_COMMAND} -E make_directory ${PROJECT_BINARY_DIR}/man
      COMMAND ${PAIRPERF_HELP2MAN} --no-info --no-discard-stderr --section=1
              --version-string=${PROJECT_VERSION} "--help-option=${_help}" "--name=${_what}"
              --output=${PROJECT_BINARY_DIR}/man/${_page} $<TARGET_FILE:pairperf>
      # help2man names every page after the program: name the subcommand pages after themselves.
      COMMAND sed -i -e "s/^\\.TH PAIRPERF /.TH ${_title} /" -e "s/^pairperf \\\\- /${_stem} \\\\- /"
              ${PROJECT_BINARY_DIR}/man/${_page}
      COMMAND ${PAIRPERF_GZIP} -9nf ${PROJECT_BINARY_DIR}/man/${_page}
      DEPENDS pairperf VERBATIM)
    list(APPEND _pages ${PROJECT_BINARY_DIR}/man/${_page}.gz)
  endforeach()
  add_custom_target(pairperf_man ALL DEPENDS ${_pages})
  install(FILES ${_pages} DESTINATION ${CMAKE_INSTALL_MANDIR}/man1 COMPONENT runtime)
else()
  message(STATUS "pairperf: no help2man or gzip, so no man pages (Debian: apt-get install help2man)")
endif()

# Debian packages: `cpack -G DEB` in the build tree (scripts/package does it).
set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME pairperf)
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGE_CONTACT "pairperf developers <pairperf@localhost>")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY
    "latency and bandwidth between two endpoints over TCP, UCX and RDMA verbs")
set(CPACK_DEB_COMPONENT_INSTALL ON)
set(CPACK_COMPONENTS_ALL runtime)
if(PAIRPERF_HAVE_MPI)
  list(APPEND CPACK_COMPONENTS_ALL mpi)
endif()
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SECTION net)
set(CPACK_DEBIAN_PACKAGE_PRIORITY optional)
# Depends on the shared libraries come from dpkg-shlibdeps (verbs, rdmacm, fmt, libc...):
# UCX's own Debian package already depends on libibverbs1 and librdmacm1, so the verbs transport
# costs a user nothing extra and stays in the main package.
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
set(CPACK_DEBIAN_RUNTIME_PACKAGE_NAME pairperf)
# Libraries a transport dlopen()s, which dpkg-shlibdeps cannot see: libfabric (the OFI
# transport), UCX (the UCX transport loads the job's UCX, Debian's by default).
set(_dlopened "python3")
if(PAIRPERF_HAVE_UCX)
  string(APPEND _dlopened ", libucx0 (>= 1.13)")
endif()
if(PAIRPERF_HAVE_OFI)
  string(APPEND _dlopened ", libfabric1 (>= 1.14)")
endif()
set(CPACK_DEBIAN_RUNTIME_PACKAGE_DEPENDS "${_dlopened}")
# `pairperf report` draws with matplotlib and checks its inputs against their schemas.
set(CPACK_DEBIAN_RUNTIME_PACKAGE_RECOMMENDS "python3-matplotlib, python3-jsonschema")
set(CPACK_DEBIAN_RUNTIME_PACKAGE_SUGGESTS "pairperf-mpi, ucx-utils, ibverbs-utils, iperf3")
set(CPACK_DEBIAN_RUNTIME_DESCRIPTION
    "latency and bandwidth between two endpoints, with the path the bytes took
 pairperf measures latency and bandwidth between two processes, nodes or GPUs over TCP, UCX
 (tag, active messages, RMA) and raw RDMA verbs with one client/server harness, records which
 transport and interface really carried the bytes, and judges expectations with exit codes a CI
 job can trust. `pairperf doctor` says which interface reaches a peer and whether two processes
 get the fast path or a fallback.")
set(CPACK_DEBIAN_MPI_PACKAGE_NAME pairperf-mpi)
set(CPACK_DEBIAN_MPI_PACKAGE_DEPENDS "pairperf (= ${PROJECT_VERSION}), openmpi-bin")
set(CPACK_DEBIAN_MPI_PACKAGE_SECTION net)
set(CPACK_DEBIAN_MPI_DESCRIPTION
    "pairperf mesh under mpirun or srun
 All pairs of many nodes measured with pairperf, launched by Open MPI (mpirun) or Slurm (srun):
 bandwidth and latency matrices, slow and asymmetric links, interface differences between nodes.")
# Stripped binaries, with the debug information in pairperf-dbgsym / pairperf-mpi-dbgsym (.ddeb):
# CPack strips them itself here (CPACK_STRIP_FILES would strip before it could split).
set(CPACK_DEBIAN_DEBUGINFO_PACKAGE ON)
set(CPACK_PACKAGE_DIRECTORY ${PROJECT_BINARY_DIR}/packages)
include(CPack)
