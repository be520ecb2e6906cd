"""Kill rates per module from the last mutmut run (./mutants), and every survivor that is not a known equivalent.

scripts/mutation.sh calls it. The results are read from mutmut's own files (``mutants/**/*.py.meta``);
each surviving mutant's changed line is read from the mutated source mutmut wrote next to them.
``scripts/mutation_equivalents.txt`` names the survivors that are equivalent mutants (no input can tell
them apart from the code), one per line: ``NAME | changed line | reason``. A listed name whose mutant now
changes a different line (the function was edited, the numbers moved) is reported as stale.

Usage: mutation_report.py                   the table and the unexplained survivors (exit 1 if any)
       mutation_report.py --readme docs/testing.md  write the table into that page's mutation section (between
                                            its markers) and the equivalents into docs/mutation_equivalents.md
       mutation_report.py --modules         the modules setup.cfg mutates, safety modules first
       mutation_report.py --survivors MODULE  each survivor of MODULE with the line it changes
       mutation_report.py --survivor-names MODULE  their names and those no test reached (mutation.sh --survivors)
"""

from __future__ import annotations

import ast
import collections
import configparser
import difflib
import fnmatch
import json
import os
import sys
import textwrap
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
MUTANTS = REPO / "mutants"
EQUIVALENTS = REPO / "scripts" / "mutation_equivalents.txt"
EQUIVALENTS_DOC = REPO / "docs" / "mutation_equivalents.md"
TESTING_DOC = REPO / "docs" / "testing.md"  # the kill-rate table, between the mutation markers
BEGIN, END = "<!-- mutation:begin -->", "<!-- mutation:end -->"
# The modules that decide whether an arm moves: reported first, held to the stricter bar (docs/testing.md).
SAFETY = ("ladder_ros.core.safety", "ladder_ros.core.safety_supervisor", "ladder_ros.robots.")
# mutmut's exit codes (mutmut/stats.py status_by_exit_code): a kill, a hang, a crash all catch the mutant.
CAUGHT = {"killed", "timeout", "segfault"}
STATUS = {0: "survived", 1: "killed", 3: "killed", 5: "no tests", 33: "no tests", 34: "skipped", 36: "timeout",
          37: "caught by type check", -24: "timeout", 24: "timeout", 152: "timeout", 255: "timeout",
          -11: "segfault", -9: "segfault", None: "not checked"}


def mutated_files() -> list[str]:
    """The source files setup.cfg's [mutmut] only_mutate selects, relative to the repository."""
    config = configparser.ConfigParser()
    config.read(REPO / "setup.cfg")
    patterns = [p for p in config.get("mutmut", "only_mutate").split("\n") if p.strip()]
    files = sorted(str(p.relative_to(REPO)) for p in (REPO / "ladder_ros").rglob("*.py"))
    return [f for f in files if any(fnmatch.fnmatch(f, p) for p in patterns) and not f.endswith("__init__.py")]


def module_name(path: str) -> str:
    return path[:-3].replace("/", ".")


def is_safety(module: str) -> bool:
    return module in SAFETY or any(module.startswith(p) for p in SAFETY if p.endswith("."))


def ordered_modules() -> list[str]:
    modules = [module_name(f) for f in mutated_files()]
    return [m for m in modules if is_safety(m)] + [m for m in modules if not is_safety(m)]


@dataclass
class Mutant:
    name: str  # mutmut's name, e.g. ladder_ros.core.safety.xǁJointTargetFilterǁcheck__mutmut_48
    module: str
    status: str
    change: str  # the changed line(s) as the mutant has them ("" when unknown)

    @property
    def function(self) -> str:
        """``JointTargetFilter.check`` from ``xǁJointTargetFilterǁcheck__mutmut_48``."""
        local = self.name[len(self.module) + 1:].rsplit("__mutmut_", 1)[0]
        return local[2:].replace("\u01c1", ".") if local.startswith("x\u01c1") else local[2:]


def _functions(source: str) -> dict[str, str]:
    """Each function's source by name; lines are split once (ast.get_source_segment splits the file per call,
    which is quadratic in a mutated file of thousands of functions)."""
    tree = ast.parse(source)
    lines = source.splitlines()
    return {node.name: "\n".join(lines[node.lineno - 1:node.end_lineno]) for node in ast.walk(tree)
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))}


def _change(functions: dict[str, str], local: str) -> str:
    original = functions.get(local.rsplit("__mutmut_", 1)[0] + "__mutmut_orig")
    mutated = functions.get(local)
    if original is None or mutated is None:
        return ""
    base = local.rsplit("__mutmut_", 1)[0]  # the signature line differs by the name; defaults may be mutated
    original, mutated = original.replace(base + "__mutmut_orig", base, 1), mutated.replace(local, base, 1)
    diff = difflib.unified_diff(original.splitlines(), mutated.splitlines(), lineterm="", n=0)
    added = [line[1:].strip() for line in diff if line.startswith("+") and not line.startswith("+++")]
    return " / ".join(added) if added else "(line removed)"


def load(modules: list[str] | None = None) -> list[Mutant]:
    """Every mutant of the mutated files with its status; the changed line only for survivors."""
    out = []
    for path in mutated_files():
        module = module_name(path)
        if modules is not None and module not in modules:
            continue
        meta = MUTANTS / (path + ".meta")
        if not meta.exists():
            continue
        codes = json.loads(meta.read_text())["exit_code_by_key"]
        functions = None
        for name, code in codes.items():
            status = STATUS.get(code, "suspicious")
            change = ""
            if status == "survived":
                if functions is None:
                    functions = _functions((MUTANTS / path).read_text())
                change = _change(functions, name[len(module) + 1:])
            out.append(Mutant(name, module, status, change))
    return out


def load_equivalents() -> dict[str, tuple[str, str]]:
    """name -> (changed line, reason) from scripts/mutation_equivalents.txt."""
    out = {}
    for number, line in enumerate(EQUIVALENTS.read_text().splitlines(), 1):
        if not line.strip() or line.startswith("#"):
            continue
        # The name has no " | " and the reason is written without one; the changed line may hold one
        # (an annotation such as "bool | None").
        name, _, rest = line.partition(" | ")
        changed, _, reason = rest.rpartition(" | ")
        parts = [name.strip(), changed.strip(), reason.strip()]
        if not all(parts):
            raise SystemExit(f"{EQUIVALENTS.name}:{number}: expected 'NAME | changed line | reason', got {line!r}")
        out[parts[0]] = (parts[1], parts[2])
    return out


def _normal(text: str) -> str:
    return " ".join(text.split())


def classify(mutants: list[Mutant], equivalents: dict[str, tuple[str, str]]):
    """(equivalent survivors with reasons, unexplained survivors, stale entries)."""
    equivalent, unexplained, stale = [], [], []
    for m in mutants:
        if m.status != "survived":
            continue
        listed = equivalents.get(m.name)
        if listed is None:
            unexplained.append(m)
        elif _normal(listed[0]) != _normal(m.change):
            stale.append((m, listed[0]))
        else:
            equivalent.append((m, listed[1]))
    return equivalent, unexplained, stale


def rows(mutants: list[Mutant]) -> list[tuple[str, collections.Counter]]:
    counts: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
    for m in mutants:
        counts[m.module][m.status] += 1
    order = ordered_modules()

    def rank(module: str) -> tuple:
        return order.index(module) if module in order else len(order), module

    return [(module, counts[module]) for module in sorted(counts, key=rank)]


def caught(c: collections.Counter) -> int:
    return sum(c[s] for s in CAUGHT)


def checked(c: collections.Counter) -> int:
    return sum(c.values()) - c["not checked"]


def rate(c: collections.Counter) -> str:
    return f"{100 * caught(c) / checked(c):.1f} %" if checked(c) else "-"


def print_table(mutants: list[Mutant]) -> None:
    header = ("module", "mutants", "killed", "timeout", "survived", "no tests", "not checked", "kill rate")
    print("{:38} {:>7} {:>6} {:>7} {:>8} {:>8} {:>11} {:>9}".format(*header))
    for module, c in rows(mutants):
        print(f"{module:38} {sum(c.values()):7} {c['killed'] + c['segfault']:6} {c['timeout']:7} "
              f"{c['survived']:8} {c['no tests']:8} {c['not checked']:11} {rate(c):>9}")


def short(module: str) -> str:
    return module.removeprefix("ladder_ros.").replace(".", "/") + ".py"


def readme_section(mutants: list[Mutant], equivalent: list[tuple[Mutant, str]], unexplained: list[Mutant],
                   page: Path = TESTING_DOC) -> str:
    """The table of ``page`` (docs/testing.md): per module, its mutants, kills, survivors, and how many survivors
    are named equivalents; its link to the equivalents is relative to ``page``."""
    named = collections.Counter(m.module for m, _ in equivalent)
    link = os.path.relpath(EQUIVALENTS_DOC, Path(page).resolve().parent)
    lines = ["Last run (mutmut 3.8.1, `scripts/mutation.sh`, on this project's 2-core machine; killed includes",
             "time-outs; safety modules in bold, first). Every surviving mutant named *equivalent* is listed with its",
             f"changed line and the reason no input tells it apart from the code in "
             f"[{EQUIVALENTS_DOC.relative_to(REPO)}]({link}).", "",
             "| module | mutants | killed | survived | of them equivalent | no test | kill rate |",
             "| --- | ---: | ---: | ---: | ---: | ---: | ---: |"]
    total = collections.Counter()
    unrun = []
    for module, c in rows(mutants):
        if not checked(c):  # no mutant of it checked in ./mutants: left out, named below the table
            unrun.append(module)
            continue
        name = f"**`{short(module)}`**" if is_safety(module) else f"`{short(module)}`"
        lines.append(f"| {name} | {checked(c)} | {caught(c)} | {c['survived']} | {named[module]} | {c['no tests']} | "
                     f"{rate(c)} |")
        total.update(c)
    lines.append(f"| all | {checked(total)} | {caught(total)} | {total['survived']} | {sum(named.values())} | "
                 f"{total['no tests']} | {rate(total)} |")
    if unrun:
        lines += ["", *textwrap.wrap("Not run this time (no results): " + ", ".join(f"`{short(m)}`" for m in unrun)
                                     + ".", 110)]
    if unexplained:
        lines += ["", *textwrap.wrap(f"{len(unexplained)} survivor(s) are not yet named equivalent or killed: "
                                     + ", ".join(f"`{m.name}`" for m in unexplained) + ".", 110)]
    return "\n".join(lines)


def equivalents_page(mutants: list[Mutant], equivalent: list[tuple[Mutant, str]]) -> str:
    """docs/mutation_equivalents.md: every surviving mutant named equivalent, by module, with its reason."""
    lines = ["# Equivalent mutants", "",
             *textwrap.wrap("The mutants that survived the last run of `scripts/mutation.sh` and that no input can "
                            "tell apart from the code, by module: the function, the line as the mutant changes it, "
                            "and why. "
                            "Written by `scripts/mutation.sh --readme` from `scripts/mutation_equivalents.txt`; the "
                            "kill rates are in docs/testing.md.", 110)]
    by_module: dict[str, list[tuple[Mutant, str]]] = collections.defaultdict(list)
    for m, reason in equivalent:
        by_module[m.module].append((m, reason))
    for module, _ in rows(mutants):
        if by_module.get(module):
            lines += ["", f"## `{short(module)}`", ""]
            for m, reason in by_module[module]:
                lines.append(f"- `{m.function}` `{m.change}`: {reason.rstrip('.')}.")
    return "\n".join(lines) + "\n"


def write_readme(path: Path, section: str) -> None:
    text = path.read_text()
    if BEGIN not in text or END not in text:
        raise SystemExit(f"{path}: no {BEGIN} ... {END} section")
    head, rest = text.split(BEGIN, 1)
    _, tail = rest.split(END, 1)
    path.write_text(f"{head}{BEGIN}\n{section}\n{END}{tail}")


def main(argv: list[str]) -> int:
    if argv[:1] == ["--modules"]:
        print("\n".join(ordered_modules()))
        return 0
    if argv[:1] in (["--survivors"], ["--survivor-names"]):
        equivalents = load_equivalents()
        for m in load(argv[1:] or None):
            if argv[0] == "--survivor-names" and m.status in ("survived", "no tests"):  # checked again after new tests
                print(m.name)
            elif argv[0] == "--survivors" and m.status == "survived" and m.name not in equivalents:
                print(f"{m.name}\n    {m.change}")
        return 0
    mutants = load()
    if not mutants:
        print("no results: run scripts/mutation.sh first", file=sys.stderr)
        return 1
    equivalent, unexplained, stale = classify(mutants, load_equivalents())
    if argv[:1] == ["--readme"]:
        write_readme(Path(argv[1]), readme_section(mutants, equivalent, unexplained, Path(argv[1])))
        EQUIVALENTS_DOC.write_text(equivalents_page(mutants, equivalent))
    print_table(mutants)
    print(f"\n{len(equivalent)} survivor(s) listed as equivalent in scripts/{EQUIVALENTS.name}")
    for m, line in stale:
        print(f"STALE equivalent entry {m.name}: listed for `{line}`, the mutant now changes `{m.change}`")
    if unexplained:
        print(f"{len(unexplained)} survivor(s) not listed as equivalent (a missing test, or an entry to add):")
        for m in unexplained:
            print(f"  {m.name}\n      {m.change}")
    return 1 if unexplained or stale else 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
