"""Print the mutation score per module from mutmut's results (``make mutation``).

mutmut keeps one ``<module>.py.meta`` JSON file per mutated module under
``mutants/``, with the exit code of the test run of each mutant. The score of a
module is the share of its checked mutants that the tests caught (killed, timed
out or refused by the type check); a mutant no test reaches ("no tests") counts as
not caught. Modules with nothing checked yet are left out. Usage:

    python tests/mutation_score.py [module prefix ...]
"""

from __future__ import annotations

import json
import sys
from collections import Counter
from pathlib import Path

from mutmut.stats import status_by_exit_code

CAUGHT = {"killed", "timeout", "caught by type check"}
NOT_RUN = {"not checked", "skipped", "check was interrupted by user"}


def main(prefixes: list[str]) -> int:
    rows = []
    for meta in sorted(Path("mutants/src").rglob("*.py.meta")):
        module = ".".join(meta.relative_to("mutants/src").with_suffix("").with_suffix("").parts)
        if prefixes and not any(module.startswith(p) for p in prefixes):
            continue
        codes = json.loads(meta.read_text())["exit_code_by_key"]
        counts = Counter(status_by_exit_code[code] for code in codes.values())
        checked = sum(n for status, n in counts.items() if status not in NOT_RUN)
        if not checked:
            continue
        caught = sum(counts[s] for s in CAUGHT)
        rows.append((module, len(codes), checked, caught, counts))
    if not rows:
        print("no mutation results yet: run `make mutation`")
        return 1
    marker = Path("mutants/.selection")
    selection = marker.read_text().strip() if marker.exists() else "unit"
    print(f"test selection: {selection} (make mutation SELECTION=...)")
    head = ("module", "mutants", "caught", "survived", "no tests", "score")
    print("{:<40} {:>7} {:>6} {:>8} {:>8} {:>6}".format(*head))
    for module, total, checked, caught, counts in rows:
        print(
            f"{module:<40} {total:>7} {caught:>6} {counts['survived']:>8}"
            f" {counts['no tests']:>8} {caught / checked:>6.0%}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
