# -*- coding: utf-8 -*-
# What the corelane modules share: finding the corelane on the host, checking that it is new
# enough, running it and reading its one JSON object.
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os
import re
import stat

# The first corelane with `apply --json` and `revert --json/--dry-run` (which reads the values
# the host holds now): older ones are refused by version, and any build without `apply --json`
# by asking it (`corelane apply --help`).
MIN_VERSION = (0, 2, 0)
# What `apply --json`/`revert --json` print: the version of their JSON object.
JSON_FORMAT = 1


def version_text(version):
    return ".".join(str(part) for part in version)


def first_line(text):
    """The first non-empty line of a command's error output, without corelane's prefix."""
    for line in text.splitlines():
        line = line.strip()
        if line:
            return line[len("corelane: "):] if line.startswith("corelane: ") else line
    return "no error output"


def check_corelane(module, binary):
    """Fails the host unless `binary` is a corelane at least MIN_VERSION whose `apply` has
    `--json`; returns its version."""
    if not os.path.isabs(binary):
        module.fail_json(msg="corelane_bin `%s` is not an absolute path: name the corelane on the host, such as /usr/local/bin/corelane" % binary)
    if not os.access(binary, os.X_OK):
        module.fail_json(msg="no corelane at %s on this host: set corelane_bin to the corelane installed here, or leave it unset so the role copies the controller's" % binary)
    rc, out, err = module.run_command([binary, "--version"])
    match = re.match(r"^corelane (\d+)\.(\d+)\.(\d+)", out.strip())
    if rc != 0 or not match:
        module.fail_json(msg="%s is not a corelane (`--version` said %r): set corelane_bin to the corelane binary" % (binary, first_line(out + err)))
    version = tuple(int(part) for part in match.groups())
    if version < MIN_VERSION:
        module.fail_json(
            msg="corelane at %s is %s, older than %s this module needs: install a newer corelane on the host, or leave corelane_bin unset so the role copies the controller's"
            % (binary, version_text(version), version_text(MIN_VERSION))
        )
    rc, out, err = module.run_command([binary, "apply", "--help"])
    if rc != 0 or not re.search(r"^\s*--json\b", out, re.MULTILINE):
        module.fail_json(
            msg="corelane at %s (%s) has no `apply --json`, which this module reads: it is a build without it; install corelane %s or newer built from a release, or leave corelane_bin unset so the role copies the controller's"
            % (binary, version_text(version), version_text(MIN_VERSION))
        )
    return version_text(version)


def run_json(module, binary, args, what):
    """Runs `binary args` and returns its JSON object; fails the host naming `what` and the error."""
    rc, out, err = module.run_command([binary] + args)
    if rc != 0:
        if "unexpected argument '--json'" in err or "unexpected argument '--dry-run'" in err:
            module.fail_json(msg="corelane at %s has no `%s` with JSON output: it is too old for this module; install a newer corelane" % (binary, what))
        module.fail_json(msg="%s failed: %s" % (what, first_line(err)), rc=rc, stderr=err)
    try:
        value = json.loads(out)
    except ValueError:
        value = None
    if not isinstance(value, dict):
        module.fail_json(msg="%s printed no JSON object (is %s a corelane?): %r" % (what, binary, out[:200]))
    if "format" in value and value["format"] != JSON_FORMAT:
        module.fail_json(msg="%s printed JSON of format %r; this module reads format %d: use the collection that came with this corelane" % (what, value["format"], JSON_FORMAT))
    return value


def open_state_dir(module, path, create=True):
    """Opens the state directory (creating it 0700 when `create`), refusing one that is not a
    directory owned by this user and writable by it alone, or reached through a symlink;
    returns a descriptor every later read and write goes through, or None when it is absent
    and not to be created."""
    if not os.path.isabs(path):
        module.fail_json(msg="state_dir `%s` is not an absolute path: name a directory such as /var/lib/corelane" % path)
    try:
        if create:
            os.makedirs(path, mode=0o700, exist_ok=True)
        fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except FileNotFoundError:
        if not create:
            return None
        raise
    except OSError as e:
        module.fail_json(msg="cannot use the state directory %s: %s: make it a root-owned directory (mode 0700), or set corelane_state_dir" % (path, e.strerror))
    st = os.fstat(fd)
    if st.st_uid != os.geteuid() or st.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        os.close(fd)
        module.fail_json(msg="the state directory %s must be owned by this user and writable by it alone (chmod 700)" % path)
    return fd


def read_at(dir_fd, name, limit=1 << 20):
    """A file of the state directory (never through a symlink), or None when it is absent."""
    try:
        fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=dir_fd)
    except FileNotFoundError:
        return None
    with os.fdopen(fd, "rb") as f:
        return f.read(limit)


def write_at(dir_fd, name, data):
    """Writes `name` in the state directory whole: a fresh temporary (O_EXCL|O_NOFOLLOW),
    synced, renamed over the name through the same descriptor."""
    temp = ".%s.%s.tmp" % (name, os.urandom(6).hex())
    fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600, dir_fd=dir_fd)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.rename(temp, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
    except OSError:
        try:
            os.unlink(temp, dir_fd=dir_fd)
        except OSError:
            pass
        raise


def remove_at(dir_fd, name):
    """Removes `name` from the state directory; whether it was there."""
    try:
        os.unlink(name, dir_fd=dir_fd)
        return True
    except FileNotFoundError:
        return False


def plans_left(dir_fd):
    """The plan files (`plan-NIC.json`) the state directory still holds."""
    return sorted(n for n in os.listdir(dir_fd) if n.startswith("plan-") and n.endswith(".json"))


def reported(module, what, fix, action, *args):
    """`action(*args)`, any error of it becoming the host's failure in one line naming what was
    being done, the cause and the fix (never a traceback)."""
    try:
        return action(*args)
    except Exception as e:  # noqa: BLE001 -- every cause is reported, none escapes as a traceback
        cause = getattr(e, "strerror", None) or str(e) or type(e).__name__
        module.fail_json(msg="%s failed: %s: %s" % (what, cause, fix))
