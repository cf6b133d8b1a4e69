"""Run the numeric fuzzer of tests/numeric_fuzz.py over N cases (`python scripts/numeric_fuzz.py
3000 [first_seed]`) and print a table of outcomes per op, backend and dtype, then every case
that differs."""

import collections
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent / "tests"))
import numeric_fuzz  # noqa: E402


def main(count, first):
    table = collections.defaultdict(collections.Counter)
    differences = []
    for seed in range(first, first + count):
        case = numeric_fuzz.make_case(seed)
        outcome, detail = numeric_fuzz.compare(case)
        table[(case["op"], case["backend"], case["dtype"])][outcome] += 1
        if outcome in ("differ", "nonfinite"):
            differences.append((outcome, case, detail))
    outcomes = ["agree", "policy", "range", "saturated", "nonfinite", "differ"]
    print(f"| op | backend | dtype | cases | {' | '.join(outcomes)} |\n|{'---|' * (4 + len(outcomes))}")
    totals = collections.Counter()
    for key in sorted(table):
        row = table[key]
        totals.update(row)
        print(f"| {' | '.join(key)} | {sum(row.values())} | {' | '.join(str(row[o]) for o in outcomes)} |")
    print(f"| all | | | {sum(totals.values())} | {' | '.join(str(totals[o]) for o in outcomes)} |")
    for outcome, case, detail in differences:
        shown = {k: v for k, v in case.items() if k not in ("inputs", "upstream")}
        print(f"\n{outcome}: {shown}\n  inputs: {[a.tolist() for a in case['inputs']]}\n  {detail[:2000]}")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 3000, int(sys.argv[2]) if len(sys.argv) > 2 else 0)
