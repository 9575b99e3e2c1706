# The layers' include directions, checked on every build (the pairperf_layers target) and by
# ctest against fixtures. Run as: cmake -DSOURCE_DIR=<tree> -P cmake/check_layers.cmake
#
# Each top-level folder is a layer and may include only the layers listed for it (its own
# included); patterns/ (the measurement loops, templates over the transport type) stands on core
# alone, so that every transport can instantiate them for its own class; a transport's folder may include itself, the transport interface files at the top of
# transports/ and the allocators (transports/memory/), never another transport. An include whose
# first path component is not a layer (a system header) is not checked.
cmake_minimum_required(VERSION 3.20)
if(NOT SOURCE_DIR)
  message(FATAL_ERROR "check_layers: pass -DSOURCE_DIR=<source tree>")
endif()

set(layers core patterns host transports harness diagnose analysis mesh bench)
set(may_include_core core)
set(may_include_patterns core patterns)
set(may_include_host core host)
set(may_include_transports core patterns transports)
set(may_include_harness core patterns host transports harness)
set(may_include_diagnose core patterns host transports harness diagnose)
set(may_include_analysis core host analysis)
set(may_include_mesh core patterns host transports harness analysis mesh)
set(may_include_bench core patterns host transports harness diagnose analysis mesh bench)

set(violations "")
foreach(layer IN LISTS layers)
  file(GLOB_RECURSE files RELATIVE "${SOURCE_DIR}" "${SOURCE_DIR}/${layer}/*.h"
       "${SOURCE_DIR}/${layer}/*.cpp" "${SOURCE_DIR}/${layer}/*.c")
  foreach(file IN LISTS files)
    file(STRINGS "${SOURCE_DIR}/${file}" lines REGEX "^[ \t]*#[ \t]*include[ \t]*\"")
    foreach(line IN LISTS lines)
      string(REGEX REPLACE "^[ \t]*#[ \t]*include[ \t]*\"([^\"]+)\".*" "\\1" included "${line}")
      string(REGEX MATCH "^[^/]+" top "${included}")
      if(NOT top IN_LIST layers)
        continue()
      endif()
      if(NOT top IN_LIST may_include_${layer})
        string(REPLACE ";" ", " allowed "${may_include_${layer}}")
        list(APPEND violations "${file} includes ${included}: ${layer}/ may include only ${allowed}")
        continue()
      endif()
      # One transport never reaches into another's folder.
      if(layer STREQUAL "transports" AND file MATCHES "^transports/([^/]+)/"
         AND NOT CMAKE_MATCH_1 STREQUAL "memory")
        set(own "${CMAKE_MATCH_1}")
        if(included MATCHES "^transports/([^/]+)/" AND NOT CMAKE_MATCH_1 STREQUAL own
           AND NOT CMAKE_MATCH_1 STREQUAL "memory")
          list(APPEND violations "${file} includes ${included}: a transport includes only its own folder, transports/*.h and transports/memory/")
        endif()
      endif()
    endforeach()
  endforeach()
endforeach()

if(violations)
  list(LENGTH violations count)
  string(REPLACE ";" "\n  " text "${violations}")
  message(FATAL_ERROR "pairperf layers: ${count} include(s) against the layers' direction "
                      "(see cmake/check_layers.cmake and each folder's README.md):\n  ${text}")
endif()
