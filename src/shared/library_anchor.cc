// The one source of libtessera.so (src/shared/CMakeLists.txt): a shared library target needs a
// source of its own; every symbol of the library comes from the static libraries linked whole.
// Nothing to run, no state.
