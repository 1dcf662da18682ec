#!/usr/bin/env python3
"""What each CTest suite said, from CTest's log (build/Testing/Temporary/LastTest.log): doctest's
counts and the reasons a suite or an example gave for skipping, which CTest's own summary does not
show. Used by scripts/test.sh after CTest.

    python3 scripts/ctest_summary.py [LOG]
"""
import re
import sys

KEEP = re.compile(r"^\[doctest\] (test cases|assertions):|skipped:|^sage2 example:|^GPU suite skipped")


def main():
    path = sys.argv[1] if len(sys.argv) > 1 else "build/Testing/Temporary/LastTest.log"
    try:
        lines = open(path, encoding="utf-8", errors="replace").read().splitlines()
    except OSError as e:
        print("ctest_summary: no CTest log (%s)" % e)
        return 0
    name, said = None, []
    for line in lines + ["1/1 Testing: <end>"]:
        m = re.match(r"^\d+/\d+ Testing: (\S+)", line)
        if m:
            if name and said:
                print("  %s:" % name)
                for s in said:
                    print("    " + s)
            name, said = m.group(1), []
        elif name and KEEP.search(line.strip()) and line.strip() not in said:
            said.append(line.strip())
    return 0


if __name__ == "__main__":
    sys.exit(main())
