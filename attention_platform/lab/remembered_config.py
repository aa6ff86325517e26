"""The Assignments tab's nbgrader configuration, loaded again only when a file of it changed.

nbgrader's assignment list (``AssignmentList``, in the student's server) loads its configuration
anew for every action: three times for a Submit and twice for each of the two listings its handler
answers a Submit with, each load finding, reading and running every ``nbgrader_config`` and
``jupyter_config`` file on Jupyter's config path and in the working folder. That is about half the
CPU a Submit costs the student's server, and the whole class presses Submit in the same minute.

:func:`remember` makes one manager's loads remember what each read, keyed by the folders searched
and the inode, size and modification time of every config file found there: a file added, removed
or changed is loaded again, and every caller gets a copy of its own (nbgrader sets the course and
assignment on it). A config file's code runs once per change, not once per load, so a value it
draws afresh (a random socket path) is drawn once: the Assignments tab's actions -- listing,
fetching, submitting -- start no kernel, and the Lab's Validate does not load through here. A file
that a config file includes itself (``load_subconfig``) is not looked at.
"""

from __future__ import annotations

import contextlib
import copy
import os

CONFIG_NAMES = tuple(f"{stem}{suffix}" for stem in ("nbgrader_config", "jupyter_config") for suffix in (".py", ".json"))
MOST_REMEMBERED = 16  # loads kept per manager: one per (working folder, path) nbgrader asks about


def _file_identity(path: str):
    try:
        info = os.stat(path)
    except OSError:
        return None
    return info.st_dev, info.st_ino, info.st_size, info.st_mtime_ns


def fingerprint(folders: list[str]) -> tuple:
    """What a load from ``folders`` (and the working folder) would read, as identities of files."""
    searched = [os.getcwd(), *folders]
    return tuple((folder, name, _file_identity(os.path.join(folder, name))) for folder in searched
                 for name in CONFIG_NAMES)


class RememberedLoads:
    """Loads of one manager, each by its fingerprint (at most ``MOST_REMEMBERED``; the oldest goes)."""

    def __init__(self):
        self._kept: dict[tuple, object] = {}

    def load(self, kind: str, folders: list[str], load_afresh):
        """A copy of ``load_afresh()``'s config (``kind`` names the loader), run again only when
        ``fingerprint(folders)`` changed."""
        key = (kind, fingerprint(folders))
        config = self._kept.get(key)
        if config is None:
            config = load_afresh()
            if len(self._kept) >= MOST_REMEMBERED:
                self._kept.pop(next(iter(self._kept)))
            self._kept[key] = config
        return copy.deepcopy(config)


def remember(manager) -> None:
    """Make ``manager`` (nbgrader's ``AssignmentList``) load its config through :class:`RememberedLoads`:
    its ``load_config`` and the second load of its ``get_assignment_dir_config`` (the assignment
    folder's own config). On this one object, once."""
    if getattr(manager, "_attention_remembered", False):
        return
    from jupyter_core.paths import jupyter_config_path
    from nbgrader.apps import NbGrader
    from nbgrader.exchange import ExchangeFactory

    loads = RememberedLoads()
    load_config = manager.load_config

    def remembered_load_config():
        return loads.load("server", jupyter_config_path(), load_config)

    def assignment_folder_config():
        app = NbGrader()
        app.config_file_paths.append(os.getcwd())
        app.load_config_file()
        return app.config

    @contextlib.contextmanager
    def get_assignment_dir_config():
        # nbgrader's two steps, each load remembered: the config where the server runs names the
        # assignments' folder, whose own config is then loaded from there
        with contextlib.chdir(manager.root_dir):
            config = remembered_load_config()
        assignment_dir = ExchangeFactory(config=config).List(config=config).assignment_dir
        with contextlib.chdir(assignment_dir):
            yield loads.load("assignment folder", jupyter_config_path(), assignment_folder_config)

    manager.load_config = remembered_load_config
    manager.get_assignment_dir_config = get_assignment_dir_config
    manager._attention_remembered = True

