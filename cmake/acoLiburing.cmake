# acoLiburing.cmake - finds liburing (Debian: liburing-dev) for the runtime's
# io_uring backend.  Read by CMakeLists.txt when it builds aco::rt, and by the
# installed acoConfig.cmake when a static libaco_rt was built with it (its
# users link -luring).
#
#   aco_find_liburing(<result variable>)
#
# sets the variable TRUE and defines the imported target aco::liburing
# (liburing.h's directory and the library) when both are found, else FALSE.
# A hint: LIBURING_ROOT, or CMAKE_PREFIX_PATH, for a liburing of its own.
function(aco_find_liburing result)
    if(TARGET aco::liburing)
        set(${result} TRUE PARENT_SCOPE)
        return()
    endif()
    find_path(ACO_LIBURING_INCLUDE_DIR liburing.h
        HINTS "${LIBURING_ROOT}" ENV LIBURING_ROOT PATH_SUFFIXES include)
    find_library(ACO_LIBURING_LIBRARY uring
        HINTS "${LIBURING_ROOT}" ENV LIBURING_ROOT PATH_SUFFIXES lib)
    mark_as_advanced(ACO_LIBURING_INCLUDE_DIR ACO_LIBURING_LIBRARY)
    if(NOT ACO_LIBURING_INCLUDE_DIR OR NOT ACO_LIBURING_LIBRARY)
        set(${result} FALSE PARENT_SCOPE)
        return()
    endif()
    add_library(aco::liburing UNKNOWN IMPORTED)
    set_target_properties(aco::liburing PROPERTIES
        IMPORTED_LOCATION "${ACO_LIBURING_LIBRARY}"
        INTERFACE_INCLUDE_DIRECTORIES "${ACO_LIBURING_INCLUDE_DIR}")
    set(${result} TRUE PARENT_SCOPE)
endfunction()
