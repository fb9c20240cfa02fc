"""The file system steps that make a change log publish survive a crash.

A published file is only as durable as its name: the change log syncs each file, then the
directory it is renamed into, and the parent of every directory it creates, before its source may
forget the changes. A name that must never replace another is given by a hard link.
"""

from __future__ import annotations

import os
from pathlib import Path


def link_new(source: Path, target: Path) -> None:
    """Give `source` the name `target` unless that exists (FileExistsError then).

    A hard link never replaces, so it is atomic and exclusive; a file system without hard links
    gets a rename after a check, exclusive only between publishes that do not overlap.
    """
    try:
        os.link(source, target)
    except FileExistsError:
        raise
    except OSError:
        if target.exists():
            raise FileExistsError(target) from None
        os.replace(source, target)


def made_directory(directory: Path) -> None:
    """Create `directory` and its missing parents, syncing the parent of each one created.

    Syncing a directory makes the names in it durable: the files renamed into a new partition
    directory are synced there, but the directory's own name is an entry of its parent, and
    unless that is synced too a crash can lose the directory with every file in it, after the
    source was advanced past them. A directory that exists costs one stat; one that another
    thread or publish creates meanwhile is synced by that one.
    """
    if directory.is_dir():
        return
    made_directory(directory.parent)
    try:
        directory.mkdir()
    except FileExistsError:
        if not directory.is_dir():
            raise
        return
    fsync_directory(directory.parent)


def fsync_directory(directory: Path) -> None:
    """Make a rename in `directory` durable (the new name survives a crash)."""
    descriptor = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(descriptor)
    finally:
        os.close(descriptor)
