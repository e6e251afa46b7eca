# `cmake --install build [--prefix P]`: what a machine needs to run Tessera and to build programs
# against it. Included at the end of the top-level CMakeLists.txt, once every target exists.
#
#   P/bin                          tessera, tessera-launcher (beside it: the agents start it),
#                                  tessera-cuda-probe when CUDA is built
#   P/include/tessera              the public headers (tessera/tessera.h is the umbrella)
#   P/lib/libtessera.so*           the C++ API (src/shared)
#   P/lib/cmake/Tessera            find_package(Tessera CONFIG) -> Tessera::tessera
#   P/lib/pkgconfig/tessera.pc     pkg-config --cflags --libs tessera
#   P/${TESSERA_PYTHON_INSTALL_DIR}/tessera   the Python package with its _core extension
#                                  (default lib/python3.X/dist-packages: CMakeLists.txt)
#
# Every installed path is relative to the prefix chosen at install time (the CMake package and
# the .pc file find the prefix from where they lie).

include(CMakePackageConfigHelpers)

set(tessera_programs tessera tessera-launcher)
if(TARGET tessera-cuda-probe)
  list(APPEND tessera_programs tessera-cuda-probe)
endif()
install(TARGETS ${tessera_programs} RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
# Everything this file installs, and nothing else (no tests, fuzzers, benchmarks or examples):
# `scripts/build tessera_runtime` is what the demo builds before it runs, about half the targets.
add_custom_target(tessera_runtime)
add_dependencies(tessera_runtime ${tessera_programs} tessera_shared tessera_python_core
                 tessera_python_package)
# The dashboard the head serves (it looks beside its binary: ../share/tessera/dashboard).
install(DIRECTORY ${PROJECT_SOURCE_DIR}/web/dashboard/
        DESTINATION ${CMAKE_INSTALL_DATADIR}/tessera/dashboard
        PATTERN "README.md" EXCLUDE)

install(DIRECTORY ${PROJECT_SOURCE_DIR}/include/tessera
        DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}
        FILES_MATCHING PATTERN "*.h")

# The vocabulary the public headers are written in (include/tessera/demand_setters.h: resource
# sets, label selectors, the scheduling strategy, task and actor options; placement_group.h and
# gang.h: the placement strategy and TPU slice shapes; actor.h, placement_group.h and gang.h: the
# ids of actors, reservations and jobs; gang.h: a gang's states) and the headers those include,
# under include/tessera/core in their folders (Tessera::tessera's and tessera.pc's include path),
# so the same #include lines work in the tree and installed.
set(tessera_vocabulary_headers
  base/strong_id.h labels/label.h labels/label_selector.h resources/quantity.h
  resources/resource_set.h vocabulary/ids.h vocabulary/gang_state.h
  vocabulary/placement_strategy.h vocabulary/scheduling_strategy.h
  vocabulary/task_options.h vocabulary/tpu_generation.h vocabulary/tpu_topology.h
  vocabulary/tpu_accelerator_type.h vocabulary/chip_grid.h vocabulary/slice_shape.h
  vocabulary/sub_slice.h)
foreach(header IN LISTS tessera_vocabulary_headers)
  get_filename_component(folder ${header} DIRECTORY)
  install(FILES ${PROJECT_SOURCE_DIR}/src/${header}
          DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/tessera/core/${folder})
endforeach()

install(TARGETS tessera_shared EXPORT TesseraTargets
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR})

set(tessera_cmake_dir ${CMAKE_INSTALL_LIBDIR}/cmake/Tessera)
install(EXPORT TesseraTargets NAMESPACE Tessera:: DESTINATION ${tessera_cmake_dir})
configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/TesseraConfig.cmake.in
  ${PROJECT_BINARY_DIR}/packaging/TesseraConfig.cmake
  INSTALL_DESTINATION ${tessera_cmake_dir})
# 0.x: a minor release may break the API, so only the same minor version is compatible.
write_basic_package_version_file(${PROJECT_BINARY_DIR}/packaging/TesseraConfigVersion.cmake
  VERSION ${PROJECT_VERSION} COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/packaging/TesseraConfig.cmake
              ${PROJECT_BINARY_DIR}/packaging/TesseraConfigVersion.cmake
        DESTINATION ${tessera_cmake_dir})

configure_file(${PROJECT_SOURCE_DIR}/cmake/tessera.pc.in
               ${PROJECT_BINARY_DIR}/packaging/tessera.pc @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/packaging/tessera.pc
        DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)

# The Python package: its sources (what tessera_python_package copies into build/python) and
# the extension, which links the static libraries, never libtessera.so.
install(DIRECTORY ${PROJECT_SOURCE_DIR}/python/tessera
        DESTINATION ${TESSERA_PYTHON_INSTALL_DIR}
        FILES_MATCHING PATTERN "*.py" PATTERN "*.pyi" PATTERN "py.typed"
        PATTERN "__pycache__" EXCLUDE)
install(TARGETS tessera_python_core LIBRARY DESTINATION ${TESSERA_PYTHON_INSTALL_DIR}/tessera)
