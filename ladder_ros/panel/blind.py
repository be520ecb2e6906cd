"""What the operator of a blind session that compares policies must not see, and the one place it is hidden.

In a blind A/B session (:mod:`ladder_ros.panel.ab_session`) the operator sees "A" and "B" only. When the two
systems of a pair run under different policies, the policies' names, their config files (path and file name)
and their config digests are the session's *secrets* until its key is written: any of them on the screen, in
the event log or in the panel's terminal would tell the operator which arm is which. :class:`SessionSecrets`
holds them (the plan's policy names from the start, each one's config and digest once the graph's
``policy/status`` names them, :meth:`SessionSecrets.learn`) and hides them:

* :meth:`~SessionSecrets.redact` replaces every secret in a line of text by :data:`SEALED` (the panel's event
  log, the lines it prints);
* :meth:`~SessionSecrets.mask` turns a status or record document into what the operator may see: every field
  that names the system (``variant``, ``policy``) or the policy's identity (``policy_config_hash``,
  ``config_hash``, ``config``) says the arm, and every other text has its secrets redacted (identifiers and
  enumerations are kept as they are);
* :meth:`~SessionSecrets.found` lists the secrets a text shows (the scan of what the panel showed).

A secret counts wherever it stands, inside another word too (``low_noise`` in ``low_noise_vs_high.yaml``), as a
scan for it would find it: give compared policies distinctive names (a plan refuses one shorter than
:data:`MIN_SECRET_CHARS`, whose every occurrence in ordinary words would be redacted). Once the key is written
the session has no secrets any more (:meth:`~SessionSecrets.reveal`): the panel then says which system ran as A
and as B. Pure: no Qt, no rclpy.
"""

from __future__ import annotations

import re
from pathlib import PurePath
from typing import Any, Iterable

SEALED = "[sealed]"  # what a secret reads as on the panel while the session is open
SYSTEM_FIELDS = ("variant", "policy")  # fields that name the system an episode ran
POLICY_IDENTITY_FIELDS = ("policy_config_hash", "config_hash", "config")  # fields that name the policy's config
# Kept as they are: identifiers (an episode id is built by the panel from the plan's name, pair and arm) and
# enumerations the documents check.
KEPT_FIELDS = frozenset({"doc", "schema_version", "episode_id", "assigned_id", "task_id", "start_after", "state",
                         "clock", "kind", "start", "command"})
MIN_SECRET_CHARS = 3  # a compared policy's name is at least this long


def secrets_pattern(texts: Iterable[str]) -> re.Pattern | None:
    """A pattern that finds any of ``texts`` (longest first, so a path wins over the name inside it); None for
    no text."""
    texts = sorted({t for t in texts if t}, key=lambda t: (-len(t), t))
    return re.compile("|".join(map(re.escape, texts))) if texts else None


class SessionSecrets:
    """The secrets of one open blind session that compares policies (see the module docstring)."""

    def __init__(self, names: Iterable[str] = ()):
        self._secrets: set[str] = set()
        self._pattern: re.Pattern | None = None
        self.sealed = True
        for name in names:
            self.add(name)

    def add(self, *texts: str) -> None:
        """Keep ``texts`` secret (empty ones are ignored)."""
        new = {str(t).strip() for t in texts if t and str(t).strip()} - self._secrets
        if new:
            self._secrets |= new
            self._pattern = secrets_pattern(self._secrets)

    def learn(self, name: str, config: str = "", config_hash: str = "") -> None:
        """A compared policy as the graph serves it: its config (a name under policies/ or a path, whose file name
        is kept secret too) and its config's digest (whole, and the 8 characters a ranking shows)."""
        texts = [name, config, config_hash, config_hash[:8]]
        if config:
            path = PurePath(config)
            texts += [path.name, path.stem]
        self.add(*texts)

    @property
    def secrets(self) -> frozenset[str]:
        return frozenset(self._secrets)

    def reveal(self) -> None:
        """The key is written: nothing is secret any more."""
        self.sealed = False

    def found(self, text: str) -> list[str]:
        """The secrets ``text`` shows, each once, in the order they first appear (whether sealed or not)."""
        if self._pattern is None:
            return []
        return list(dict.fromkeys(m.group(0) for m in self._pattern.finditer(text)))

    def redact(self, text: str) -> str:
        """``text`` with every secret replaced by :data:`SEALED` while the session is sealed."""
        if not self.sealed or self._pattern is None:
            return text
        return self._pattern.sub(SEALED, text)

    def mask(self, doc: Any, arm: str) -> Any:
        """A copy of ``doc`` as the operator may see it (see the module docstring); unchanged once revealed."""
        if not self.sealed:
            return doc
        if isinstance(doc, dict):
            out = {}
            for key, value in doc.items():
                if isinstance(value, str) and key in SYSTEM_FIELDS + POLICY_IDENTITY_FIELDS:
                    out[key] = arm
                elif isinstance(value, str) and key in KEPT_FIELDS:
                    out[key] = value
                else:
                    out[key] = self.mask(value, arm)
            return out
        if isinstance(doc, list):
            return [self.mask(v, arm) for v in doc]
        if isinstance(doc, str):
            return self.redact(doc)
        return doc
