"""Accessibility checks of a page in a Playwright browser: axe-core's rules and the keyboard.

axe-core comes from npm with configurable-http-proxy (scripts/install-system-deps.sh, ./node_modules):
its axe.min.js is put into the page and run there, offline. A Python integration from PyPI would
bundle the same file behind a wrapper of its own; the npm package is pinned where the proxy is.

* :func:`assert_accessible`: no serious or critical violation in the page (or in the parts ``context``
  names), each one listed with its rule, target and help; ``known`` excuses a violation by rule and
  target only, each with the reason it is not ours to fix (:class:`NotOurs`).
* :func:`assert_keyboard_reaches`: Tab from the start of a container reaches each control in it.

The browser context needs ``bypass_csp=True``: the formgrader's pages allow only scripts of their own
nonce, and axe's script is not one of them.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

AXE = Path(__file__).resolve().parent.parent / "node_modules" / "axe-core" / "axe.min.js"
SEVERE = ("serious", "critical")
CONTROLS = ("a[href], button:not([disabled]), input:not([disabled]):not([type=hidden]), select:not([disabled]), "
            "textarea:not([disabled]), [tabindex]:not([tabindex='-1'])")


@dataclass(frozen=True)
class NotOurs:
    """A violation in markup the course does not make: ``rule`` at a target containing ``target``."""

    rule: str
    target: str
    why: str


def severe_violations(page, context=None, known: tuple[NotOurs, ...] = ()) -> list[str]:
    """Each serious or critical node axe-core finds, as 'rule (impact) at target: help', less ``known``."""
    if not AXE.exists():
        raise FileNotFoundError(f"{AXE} is missing: run `make system-deps`")
    if not page.evaluate("typeof window.axe === 'object'"):
        page.add_script_tag(path=str(AXE))
    result = page.evaluate("context => axe.run(context || document, {resultTypes: ['violations']})", context)
    found = []
    for violation in result["violations"]:
        if violation["impact"] not in SEVERE:
            continue
        for node in violation["nodes"]:
            target = " ".join(map(str, node["target"]))
            if any(k.rule == violation["id"] and k.target in target for k in known):
                continue
            found.append(f"{violation['id']} ({violation['impact']}) at {target}: {violation['help']}")
    return found


def assert_accessible(page, context=None, known: tuple[NotOurs, ...] = ()) -> None:
    found = severe_violations(page, context, known)
    assert not found, f"{page.url}: {len(found)} serious or critical accessibility violations:\n  " + "\n  ".join(found)


def assert_keyboard_reaches(page, container: str, max_presses: int = 200) -> None:
    """Focus the start of ``container``, press Tab until focus leaves it, and check that every visible
    control in it had the focus on the way."""
    controls = page.evaluate(
        """([container, selector]) => {
             const root = document.querySelector(container);
             const visible = el => !!(el.offsetWidth || el.offsetHeight || el.getClientRects().length);
             return [...root.querySelectorAll(selector)].filter(visible).map((el, i) => {
               el.dataset.keyboardCheck = String(i);
               return `${el.tagName.toLowerCase()} "${(el.innerText || el.value || el.getAttribute('aria-label') || '').trim().slice(0, 40)}"`;
             });
           }""", [container, CONTROLS])
    assert controls, f"no control in {container}"
    page.evaluate("""container => {
                       const start = document.createElement('span');
                       start.tabIndex = 0; start.id = 'keyboard-check-start';
                       const root = document.querySelector(container);
                       root.insertBefore(start, root.firstChild);
                       start.focus();
                     }""", container)
    reached = set()
    for _ in range(max_presses):
        page.keyboard.press("Tab")
        index = page.evaluate("""container => {
                                   const el = document.activeElement;
                                   if (!el || !document.querySelector(container).contains(el)) return null;
                                   return el.dataset.keyboardCheck === undefined ? -1 : Number(el.dataset.keyboardCheck);
                                 }""", container)
        if index is None:
            break
        reached.add(index)
    missed = [control for i, control in enumerate(controls) if i not in reached]
    assert not missed, f"{page.url}: Tab through {container} never reaches: {missed}"
