# CPack pre-build script: strips every ELF file in the staging tree the way
# dh_strip does (--remove-section=.comment --remove-section=.note), which
# CPACK_STRIP_FILES does not: it runs a bare `strip`, and lintian then reports
# binary-has-unneeded-section. The build-id note (.note.gnu.build-id) stays.
if(NOT CPACK_SEALFS_STRIP)
  message(FATAL_ERROR "strip.cmake: CPACK_SEALFS_STRIP is not set (no strip program found at configure time)")
endif()
file(GLOB_RECURSE staged LIST_DIRECTORIES false "${CPACK_TEMPORARY_DIRECTORY}/*")
set(stripped 0)
foreach(path IN LISTS staged)
  if(IS_SYMLINK "${path}")
    continue()
  endif()
  file(READ "${path}" magic LIMIT 4 HEX)
  if(magic STREQUAL "7f454c46")
    execute_process(COMMAND "${CPACK_SEALFS_STRIP}" --remove-section=.comment --remove-section=.note "${path}"
                    RESULT_VARIABLE rc)
    if(NOT rc EQUAL 0)
      message(FATAL_ERROR "strip.cmake: ${CPACK_SEALFS_STRIP} failed on ${path}")
    endif()
    math(EXPR stripped "${stripped} + 1")
  endif()
endforeach()
if(stripped EQUAL 0)
  message(FATAL_ERROR "strip.cmake: no ELF file under ${CPACK_TEMPORARY_DIRECTORY}")
endif()
message(STATUS "sealfs: stripped ${stripped} ELF file(s)")
