"""python -m minitensor.homework: strip, grade, bundle (see the package's docstring)."""

import argparse
import sys

from . import __doc__ as USAGE
from .bundle import bundle
from .grade import grade
from .strip import strip
from .tasks import TASKS, HomeworkError

def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    parser = argparse.ArgumentParser(prog="python -m minitensor.homework", description=USAGE,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = parser.add_subparsers(dest="command", required=True)
    strip_parser = commands.add_parser("strip", help="write a student copy")
    strip_parser.add_argument("out")
    strip_parser.add_argument("--keep", nargs="*", default=(), metavar="TASK", help="tasks to leave solved")
    strip_parser.add_argument("--manifest", help="a file listing the files to copy, one a line "
                                                 "(default: the files git tracks)")
    grade_parser = commands.add_parser("grade", help="grade a copy task by task")
    grade_parser.add_argument("path", nargs="?", default=".")
    grade_parser.add_argument("--task", help="grade one task")
    grade_parser.add_argument("--tasks", nargs="*", metavar="TASK", help="the tasks of an assignment (default: all)")
    grade_parser.add_argument("--extra", help="a folder of extra (hidden) tests to add")
    grade_parser.add_argument("--tests", help="the teacher's tests folder (default: the solution's tests/)")
    grade_parser.add_argument("--timeout", type=float, default=60.0, help="seconds per test (default 60)")
    grade_parser.add_argument("--gradescope", metavar="PATH", help="also write Gradescope's results.json here")
    grade_parser.add_argument("--worker-python", metavar="PYTHON",
                              help="the interpreter student code runs under (default: this one)")
    grade_parser.add_argument("--require-user", action="store_true",
                              help="as root, refuse to grade unless student code can run as a user of its own")
    grade_parser.add_argument("-v", "--verbose", action="store_true", help="print each failing test's feedback")
    bundle_parser = commands.add_parser("bundle", help="write a Gradescope autograder zip for an assignment")
    bundle_parser.add_argument("out")
    bundle_parser.add_argument("--tasks", nargs="*", metavar="TASK", help="the assignment's tasks (default: all)")
    bundle_parser.add_argument("--extra", help="a folder of hidden tests to include")
    bundle_parser.add_argument("--timeout", type=float, default=60.0, help="seconds per test (default 60)")
    args = parser.parse_args(argv)
    try:
        if args.command == "strip":
            out = strip(args.out, keep=args.keep, manifest=args.manifest)
            print(f"student copy written to {out}: {len(TASKS) - len(args.keep)} tasks to do")
            return 0
        if args.command == "bundle":
            out = bundle(args.out, tasks=args.tasks, extra=args.extra, timeout=args.timeout)
            print(f"autograder written to {out}: upload it as the assignment's autograder (zip)")
            return 0
        ok, _ = grade(args.path, task=args.task, tasks=args.tasks, extra=args.extra, tests=args.tests,
                      timeout=args.timeout, gradescope=args.gradescope, verbose=args.verbose,
                      python=args.worker_python, require_user=args.require_user)
        return 0 if ok else 1
    except HomeworkError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
