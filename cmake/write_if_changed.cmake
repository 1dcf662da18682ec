# sage2_write_if_changed(<file> <content> <written-var>): writes <content> to <file> unless the file
# already holds exactly that (so its dependents are not rebuilt), creating the folder, through a
# temporary file and a rename so a reader never sees half a file. Sets <written-var> to TRUE when it
# wrote, else FALSE. Included by the build-time scripts that generate sources (cmake -P).
function(sage2_write_if_changed file content written_var)
  set(${written_var} FALSE PARENT_SCOPE)
  if(EXISTS "${file}")
    file(READ "${file}" old)
    if(old STREQUAL content)
      return()
    endif()
  endif()
  get_filename_component(dir "${file}" DIRECTORY)
  file(MAKE_DIRECTORY "${dir}")
  file(WRITE "${file}.tmp" "${content}")
  file(RENAME "${file}.tmp" "${file}")
  set(${written_var} TRUE PARENT_SCOPE)
endfunction()
