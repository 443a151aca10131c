#!/usr/bin/python
# -*- coding: utf-8 -*-
# Keeps track of the corelane the role copies to a host: only a binary the role installed
# (recorded with its sha256 in the state directory) is ever replaced or removed.
from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: corelane_install
short_description: Guard, record and remove the corelane binary the role copies to a host
description:
  - With I(state=checked), before the role copies the controller's corelane to I(path): fails
    the host if a file is there that the role did not install (no record in I(state_dir), or
    a record of other bytes), naming it and the fix (C(-e corelane_bin=PATH) to use it). In
    check mode, fails too when nothing is at I(path), since check mode copies nothing.
  - With I(state=recorded), after the copy: records I(path) and its sha256 in
    C(STATE_DIR/installed-corelane.json).
  - With I(state=absent), on revert: removes I(path) only if it is still the file recorded and
    no C(plan-*.json) remains in I(state_dir) for another interface; then the record.
version_added: "0.2.0"
options:
  path:
    description: Where the role installs corelane.
    type: path
    required: true
  state:
    description: What to do (see the description).
    type: str
    choices: [checked, recorded, absent]
    required: true
  state_dir:
    description: The root-owned directory (mode 0700) the record lives in.
    type: path
    default: /var/lib/corelane
attributes:
  check_mode:
    support: full
    description: Changes nothing; I(state=checked) fails when there is no corelane to run.
  diff_mode:
    support: none
notes:
  - Runs as root on the host.
author:
  - corelane developers
"""

EXAMPLES = r"""
- name: Refuse to overwrite a corelane the role did not install
  corelane.cores.corelane_install:
    path: /usr/local/bin/corelane
    state: checked
"""

RETURN = r"""
sha256:
  description: The sha256 of the file at I(path) (absent when there is none).
  returned: always
  type: str
kept:
  description: With I(state=absent), why the binary stays (empty when it was removed).
  returned: always
  type: str
"""

import hashlib
import json
import os

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.corelane.cores.plugins.module_utils.corelane import (
    open_state_dir,
    plans_left,
    read_at,
    remove_at,
    reported,
    write_at,
)

RECORD = "installed-corelane.json"


def sha256_of(path):
    """The sha256 of the regular file at `path` (never through a symlink), or None."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except FileNotFoundError:
        return None
    digest = hashlib.sha256()
    with os.fdopen(fd, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def record_of(module, dir_fd, state_dir):
    if dir_fd is None:
        return None
    data = reported(module, "reading %s/%s" % (state_dir, RECORD), "remove it if corrupt", read_at, dir_fd, RECORD)
    if data is None:
        return None
    try:
        record = json.loads(data)
        if isinstance(record, dict) and isinstance(record.get("path"), str) and isinstance(record.get("sha256"), str):
            return record
    except ValueError:
        pass
    module.fail_json(msg="%s/%s is not a record the role wrote: remove it (the corelane it named is then treated as not the role's)" % (state_dir, RECORD))


def main():
    module = AnsibleModule(
        argument_spec=dict(
            path=dict(type="path", required=True),
            state=dict(type="str", required=True, choices=["checked", "recorded", "absent"]),
            state_dir=dict(type="path", default="/var/lib/corelane"),
        ),
        supports_check_mode=True,
    )
    path, state, state_dir = module.params["path"], module.params["state"], module.params["state_dir"]
    if not os.path.isabs(path):
        module.fail_json(msg="corelane_install_path `%s` is not an absolute path" % path)
    creating = state == "recorded" and not module.check_mode
    dir_fd = open_state_dir(module, state_dir, create=creating)
    record = record_of(module, dir_fd, state_dir)
    now = reported(module, "reading %s" % path, "check the file", sha256_of, path)
    ours = record is not None and record["path"] == path and record["sha256"] == now
    result = dict(changed=False, sha256=now or "", kept="")
    if state == "checked":
        if now is not None and not ours:
            module.fail_json(
                msg="%s is a corelane (or other file) this role did not install: it is left as it is; pass -e corelane_bin=%s to use it, or remove it to let the role install the controller's"
                % (path, path)
            )
        if now is None and module.check_mode:
            module.fail_json(msg="check mode copies nothing: pass -e corelane_bin=PATH (a corelane on the hosts) or apply once, then check")
        module.exit_json(**result)
    if state == "recorded":
        if now is None:
            module.fail_json(msg="no file at %s to record: the copy did not happen" % path)
        if not ours:
            result["changed"] = True
            if not module.check_mode:
                data = json.dumps(dict(path=path, sha256=now)).encode()
                reported(module, "writing %s/%s" % (state_dir, RECORD), "check the state directory", write_at, dir_fd, RECORD, data)
        module.exit_json(**result)
    # absent
    if now is None or not ours:
        result["kept"] = "" if now is None else "%s is not the file the role installed" % path
        module.exit_json(**result)
    others = plans_left(dir_fd)
    if others:
        result["kept"] = "%s still holds %s" % (state_dir, ", ".join(others))
        module.exit_json(**result)
    result["changed"] = True
    if not module.check_mode:
        reported(module, "removing %s" % path, "remove it by hand", os.unlink, path)
        reported(module, "removing %s/%s" % (state_dir, RECORD), "remove it by hand", remove_at, dir_fd, RECORD)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
