"""The implementations of each op a student's tests are judged against, with neutral labels.

Wheats and hidden chaffs are on the grader's side only; in a student copy (where strip left them
out) only the public chaffs are here, for `practice`."""

from . import public_chaffs

try:  # the grader's side: absent from a student copy
    from . import hidden_chaffs, wheats
except ImportError:
    hidden_chaffs = wheats = None

# The kinds of input a chaff may survive: its `survives` is a tuple of sets of these, each set a
# combination that hides it (a suite whose inputs are all of one set cannot catch it). A hint names
# the input that would have caught it; the grader's tests check that a suite limited to some of
# these misses exactly the chaffs they hide.
CONDITIONS = {
    "ones_upstream": "an all-ones upstream gradient (a plain .sum() loss, or backward() of ones)",
    "square": "square or same-shape inputs only (nothing broadcast, no transpose visible in a shape)",
    "float64": "float64 inputs only (no check that float32 stays float32)",
    "one_call": "one backward pass per test",
    "distinct_indices": "indices that never name a position twice",
    "T=1": "a single query (T = 1)",
}


class Implementation:
    """One implementation of an op under a neutral label ('correct implementation B', 'public
    buggy implementation 2', 'hidden buggy implementation 1'): the label is all a student sees."""

    def __init__(self, code, label, kind):
        self.code, self.label, self.kind = code, label, kind  # kind: "wheat", "public", "hidden"
        self.survives = [frozenset(combination) for combination in getattr(code, "survives", ())]
        self.hint = getattr(code, "hint", None)

    def hidden_by(self, conditions):
        """Whether a suite whose inputs are limited to `conditions` cannot catch this implementation."""
        return any(combination <= set(conditions) for combination in self.survives)

    def __repr__(self):
        return f"<{self.label}>"


def implementations(op, include=("wheat", "public", "hidden")):
    """[Implementation] of `op`: the wheats, then the public chaffs, then the hidden ones."""
    found = []
    sources = [("wheat", wheats and wheats.WHEATS), ("public", public_chaffs.PUBLIC_CHAFFS),
               ("hidden", hidden_chaffs and hidden_chaffs.HIDDEN_CHAFFS)]
    for kind, codes in sources:
        if kind not in include or not codes:
            continue
        for number, code in enumerate([c for c in codes if c.op == op]):
            label = {"wheat": f"correct implementation {'ABCDEFGH'[number]}",
                     "public": f"public buggy implementation {number + 1}",
                     "hidden": f"hidden buggy implementation {number + 1}"}[kind]
            found.append(Implementation(code, label, kind))
    return found


def has_wheats():
    return wheats is not None
