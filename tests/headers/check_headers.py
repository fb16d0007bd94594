"""Checks Loom's public headers with the flags of a user who builds warning-clean:
-std=c++20 -Wall -Wextra -Wpedantic -Werror and no OpenMP flags.

  check_headers.py alone LIST COMPILER INCLUDE_DIR...
      compiles each header of LIST (one path a line, relative to the first include dir)
      alone, as a translation unit that includes only it (-fsyntax-only).
  check_headers.py program LIST COMPILER SOURCE WORK_DIR INCLUDE_DIR... -- LINK_ARGS...
      compiles SOURCE with every header of LIST included first, links it with LINK_ARGS
      and runs it.

LIST is written by tests/CMakeLists.txt at configure time (a glob), so new headers are
covered without editing this test."""
import concurrent.futures
import os
import subprocess
import sys

USER_FLAGS = ["-std=c++20", "-Wall", "-Wextra", "-Wpedantic", "-Werror"]


def read_list(path):
    with open(path) as f:
        return [line.strip() for line in f if line.strip()]


def run(command, stdin=None):
    return subprocess.run(command, input=stdin, capture_output=True, text=True)


def check_alone(headers, compiler, include_dirs):
    includes = ["-I" + d for d in include_dirs]

    def compile_one(header):
        result = run([compiler, *USER_FLAGS, *includes, "-fsyntax-only", "-x", "c++", "-"],
                     stdin=f'#include "{header}"\n')
        return header, result

    failed = []
    with concurrent.futures.ThreadPoolExecutor(max_workers=os.cpu_count() or 2) as pool:
        for header, result in pool.map(compile_one, headers):
            if result.returncode != 0:
                failed.append(header)
                print(f"--- {header} does not compile alone with {' '.join(USER_FLAGS)}:")
                print(result.stderr)
    print(f"{len(headers) - len(failed)} of {len(headers)} headers compile alone")
    return not failed


def check_program(headers, compiler, source, work, include_dirs, link_args):
    os.makedirs(work, exist_ok=True)
    binary = os.path.join(work, "user_program")
    forced = [arg for h in headers for arg in ("-include", h)]
    command = [compiler, *USER_FLAGS, *["-I" + d for d in include_dirs], *forced, source,
               "-o", binary, *link_args]
    result = run(command)
    if result.returncode != 0:
        print("--- the program including every public header does not build:")
        print(" ".join(command))
        print(result.stderr)
        return False
    result = run([binary])
    print(result.stdout, end="")
    if result.returncode != 0:
        print(f"--- {binary} exited with {result.returncode}:\n{result.stderr}")
        return False
    return True


def main(argv):
    mode, headers, compiler = argv[1], read_list(argv[2]), argv[3]
    if not headers:
        print(f"{argv[2]} lists no headers")
        return 1
    if mode == "alone":
        return 0 if check_alone(headers, compiler, argv[4:]) else 1
    if mode == "program":
        split = argv.index("--")
        source, work = argv[4], argv[5]
        link_args = [arg for arg in argv[split + 1:] if arg]  # empty: a generator expression off
        ok = check_program(headers, compiler, source, work, argv[6:split], link_args)
        return 0 if ok else 1
    print(f"unknown mode {mode}")
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
