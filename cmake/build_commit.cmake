# Writes OUT, a header that defines SAGE2_BUILD_COMMIT: the commit the library is built from.
# Run at EVERY build (the custom target sage2_build_commit in CMakeLists.txt), not only at configure
# time, so a build after a commit or an edit reports the new state:
#   cmake -DSOURCE_DIR=<source root> -DOUT=<header> [-DGIT=<git executable>] -P build_commit.cmake
# Value: `git rev-parse HEAD` of SOURCE_DIR (40 hex digits), with "-dirty" appended when
# `git status --porcelain --untracked-files=no` lists anything (a tracked file differs from HEAD),
# or "unknown" when git is missing, fails, or SOURCE_DIR is not the top of a git checkout (a copy
# of the sources inside some other repository must not report that repository's commit).
# OUT is rewritten only when its content changes, so an unchanged tree rebuilds nothing.
set(commit "unknown")
if(GIT AND EXISTS "${SOURCE_DIR}")
  execute_process(COMMAND "${GIT}" -C "${SOURCE_DIR}" rev-parse --show-toplevel
                  RESULT_VARIABLE rc OUTPUT_VARIABLE top ERROR_QUIET OUTPUT_STRIP_TRAILING_WHITESPACE)
  if(rc EQUAL 0 AND NOT top STREQUAL "")
    file(REAL_PATH "${top}" top_real)
    file(REAL_PATH "${SOURCE_DIR}" source_real)
    if(top_real STREQUAL source_real)
      execute_process(COMMAND "${GIT}" -C "${SOURCE_DIR}" rev-parse HEAD
                      RESULT_VARIABLE rc OUTPUT_VARIABLE head ERROR_QUIET OUTPUT_STRIP_TRAILING_WHITESPACE)
      if(rc EQUAL 0 AND head MATCHES "^[0-9a-f]+$")
        string(LENGTH "${head}" len)
        if(len EQUAL 40)
          # --no-optional-locks: no index refresh written, so a concurrent git command never meets our lock
          execute_process(COMMAND "${GIT}" --no-optional-locks -C "${SOURCE_DIR}" status --porcelain
                                  --untracked-files=no
                          RESULT_VARIABLE rc OUTPUT_VARIABLE changes ERROR_QUIET OUTPUT_STRIP_TRAILING_WHITESPACE)
          if(rc EQUAL 0)
            set(commit "${head}")
            if(NOT changes STREQUAL "")
              string(APPEND commit "-dirty")
            endif()
          endif()
        endif()
      endif()
    endif()
  endif()
endif()
set(content "// Generated at every build by cmake/build_commit.cmake — do not edit.\n#define SAGE2_BUILD_COMMIT \"${commit}\"\n")
include("${CMAKE_CURRENT_LIST_DIR}/write_if_changed.cmake")
sage2_write_if_changed("${OUT}" "${content}" written)
if(written)
  message(STATUS "sage2 build commit: ${commit}")
endif()
