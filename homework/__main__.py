"""python -m homework: strip, grade, bundle (see the package's docstring)."""

import argparse
import sys

from . import __doc__ as USAGE
from . import check_task, worker_python
from .bundle import bundle, rehearse
from .grade import grade
from .isolation import LEVELS, IsolationError
from .strip import strip
from .tasks import TASKS, TEST_WRITING, HomeworkError

def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    parser = argparse.ArgumentParser(prog="python -m homework", description=USAGE,
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
                              help="the interpreter student code runs under (default: $MINITENSOR_WORKER_PYTHON, "
                                   "else this one)")
    grade_parser.add_argument("--isolation", choices=LEVELS, default="none",
                              help="the weakest isolation of student code to accept: grading refuses below it "
                                   "(default none; the autograder asks for landlock). Student code never runs as root.")
    grade_parser.add_argument("-v", "--verbose", action="store_true", help="print each failing test's feedback")
    bundle_parser = commands.add_parser("bundle", help="write a Gradescope autograder zip for an assignment")
    bundle_parser.add_argument("out")
    bundle_parser.add_argument("--tasks", nargs="*", metavar="TASK", help="the assignment's tasks (default: all)")
    bundle_parser.add_argument("--extra", help="a folder of hidden tests to include")
    bundle_parser.add_argument("--timeout", type=float, default=60.0, help="seconds per test (default 60)")
    bundle_parser.add_argument("--isolation", choices=LEVELS, default="landlock",
                               help="the weakest isolation the autograder accepts (default landlock)")
    practice_parser = commands.add_parser("practice", help="run your tests/student/ against the public buggy "
                                                           "implementations (test-writing tasks)")
    practice_parser.add_argument("path", nargs="?", default=".", help="your copy (default: here)")
    practice_parser.add_argument("--op", nargs="*", choices=list(TEST_WRITING.values()), metavar="OP",
                                 help=f"the ops whose tests to run (default: {', '.join(TEST_WRITING.values())})")
    practice_parser.add_argument("--worker-python", metavar="PYTHON",
                                 help="the interpreter your tests run under (default: $MINITENSOR_WORKER_PYTHON, "
                                      "else this one; as root, one that another user can run)")
    check_parser = commands.add_parser("check-task", help="what a task being added still lacks")
    check_parser.add_argument("name")
    rehearse_parser = commands.add_parser("rehearse", help="run an autograder zip on a submission here, as "
                                                           "Gradescope would")
    rehearse_parser.add_argument("autograder", help="the zip `bundle` wrote")
    rehearse_parser.add_argument("submission", help="a student's submission folder")
    rehearse_parser.add_argument("--worker-python", metavar="PYTHON",
                                 help="the student environment's interpreter (default: this one)")
    rehearse_parser.add_argument("--keep", metavar="FOLDER",
                                 help="lay the autograder out in FOLDER (new) and keep it, instead of a temporary one")
    args = parser.parse_args(argv)
    try:
        if args.command == "strip":
            out = strip(args.out, keep=args.keep, manifest=args.manifest)
            print(f"student copy written to {out}: {len(TASKS) - len(set(args.keep))} tasks to do")
            return 0
        if args.command == "practice":
            from .testwriting import practice

            with worker_python.chosen(args.worker_python) as python:
                verdicts = practice(args.path, ops=args.op, python=python)
            perfect = [v.valid and v.caught_count() == len(v.chaffs) for v in verdicts.values()]
            return 0 if perfect and all(perfect) else 1
        if args.command == "check-task":
            text, missing = check_task.report(args.name)
            print(text)
            return 1 if missing else 0
        if args.command == "rehearse":
            with worker_python.chosen(args.worker_python) as python:
                document = rehearse(args.autograder, args.submission, python=python, keep=args.keep)
            print(f"score {document['score']:g} / {sum(test['max_score'] for test in document['tests']):g}, "
                  f"in {document['execution_time']:g} s, isolation {document['extra_data']['isolation']}")
            print(document["output"])
            return 0
        if args.command == "bundle":
            out = bundle(args.out, tasks=args.tasks, extra=args.extra, timeout=args.timeout,
                         isolation_at_least=args.isolation)
            print(f"autograder written to {out}: upload it as the assignment's autograder (zip)")
            return 0
        with worker_python.chosen(args.worker_python) as python:
            ok, _ = grade(args.path, task=args.task, tasks=args.tasks, extra=args.extra, tests=args.tests,
                          timeout=args.timeout, gradescope=args.gradescope, verbose=args.verbose,
                          python=python, isolation_at_least=args.isolation)
        return 0 if ok else 1
    except (HomeworkError, IsolationError) as error:  # what the user can fix: one line, no traceback
        print(f"error: {error}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
