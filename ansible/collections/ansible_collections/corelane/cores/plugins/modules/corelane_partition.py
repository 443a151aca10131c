#!/usr/bin/python
# -*- coding: utf-8 -*-
# Applies a corelane plan on a host (or reverts it), idempotently, with check mode and diff.
from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: corelane_partition
short_description: Apply or revert a corelane core partition plan (RPS/XPS, IRQ affinity, queues)
description:
  - With I(state=applied), compares the host's current values of the plan's settings with the
    plan (C(corelane apply --json), a dry run) and applies the differences
    (C(corelane apply --yes)). A plan already in force reports no change. The previous values
    go to C(STATE_DIR/revert-NIC.json) before anything changes; a later apply adds only the
    settings it changes for the first time, so the file always holds the values from before
    the first apply. The undo of an apply (the values its dry run found) is written to the
    revert file B(before) the host changes, so a failure or a kill half-way never loses it.
  - If a change fails, corelane puts back the ones already made and the host fails alone,
    the error naming the setting.
  - The plan itself is kept as C(STATE_DIR/plan-NIC.json), for C(corelane run --plan).
  - With I(state=reverted), restores the saved values (C(corelane revert)) and removes the
    revert file and the plan; with neither on the host, nothing changes. The changes shown
    (and C(changed)) come from the values the host holds B(now): a setting already back at
    its saved value is not shown, one the kernel no longer offers is listed in C(skipped).
  - Check mode is corelane's dry run and changes nothing; C(--diff) shows each setting old and new.
version_added: "0.1.0"
options:
  nic:
    description:
      - The network interface the plan is for; 1 to 15 of the characters A-Z a-z 0-9 _ . @ -
        (it names the state files and reaches a systemd unit).
    type: str
    required: true
  state:
    description: Whether the plan is in force (C(applied)) or the saved values are back (C(reverted)).
    type: str
    choices: [applied, reverted]
    default: applied
  plan:
    description: The plan, as C(corelane_plan) returns it (the C(corelane_plan) fact). Required with I(state=applied).
    type: dict
  apply_settings:
    description:
      - With I(state=applied), also apply the plan's settings now. When false only the plan file
        is installed, for a service whose C(corelane run --plan --apply) holds the settings for its life.
    type: bool
    default: true
  bin:
    description: The corelane binary on the host.
    type: path
    default: /usr/local/bin/corelane
  state_dir:
    description: The root-owned directory (mode 0700) for the revert file and the plan.
    type: path
    default: /var/lib/corelane
attributes:
  check_mode:
    support: full
    description: corelane's dry run; nothing on the host changes, no state directory is made.
  diff_mode:
    support: full
    description: Each setting, the value the host holds now and the one it gets.
notes:
  - Runs as root on the host (C(become) where the connection is not root): it writes kernel
    settings and the root-owned state directory.
  - Needs corelane 0.2.0 or newer on the host, with C(apply --json) (checked before anything
    else; an older corelane or a build without it fails the host saying so).
author:
  - corelane developers
"""

EXAMPLES = r"""
- name: Partition eth0's cores
  corelane.cores.corelane_partition:
    nic: eth0
    plan: "{{ corelane_plan }}"
    state: applied
- name: Put eth0 back as it was
  corelane.cores.corelane_partition:
    nic: eth0
    state: reverted
"""

RETURN = r"""
changes:
  description: Each setting changed (or, in check mode, to be changed), with its old and new value.
  returned: always
  type: list
  elements: dict
  contains:
    path:
      description: The setting (a sysfs or procfs file, or C(ethtool:NIC/SETTING)).
      type: str
    from:
      description: The value it held (with I(state=reverted), the value it holds now).
      type: str
    to:
      description: The value it gets.
      type: str
skipped:
  description: Settings the kernel or the driver refuses on this device, with the reason.
  returned: always
  type: list
  elements: dict
  contains:
    path:
      description: The setting.
      type: str
    to:
      description: The value it was to get.
      type: str
    reason:
      description: Why it was left as it is.
      type: str
revert_file:
  description: Where the values from before the first apply are kept.
  returned: always
  type: str
plan_file:
  description: Where the plan is kept for C(corelane run --plan).
  returned: always
  type: str
"""

import json
import os
import re

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.corelane.cores.plugins.module_utils.corelane import (
    check_corelane,
    first_line,
    open_state_dir,
    read_at,
    remove_at,
    reported,
    run_json,
    write_at,
)

# An interface name as the kernel takes one (under IFNAMSIZ), in the characters that are safe
# in a file name and in a systemd unit.
NIC_NAME = re.compile(r"^[A-Za-z0-9_.@-]{1,15}$")


def diff_of(nic, changes, before_header, after_header):
    """Ansible's diff: one line per setting, its old value before and its new one after."""
    def lines(key):
        return "".join("%s = %s\n" % (c["path"], c[key]) for c in changes)
    return dict(before=lines("from"), after=lines("to"), before_header=before_header % nic, after_header=after_header % nic)


def merged_revert(earlier, later):
    """The revert entries of an earlier apply with those of a later one added: a setting both
    changed keeps the value from before the first."""
    known = set(entry["path"] for entry in earlier)
    return earlier + [entry for entry in later if entry["path"] not in known]


def as_entries(changes):
    return [dict(path=c["path"], to=c["to"], **{"from": c["from"]}) for c in changes]


class StateDir(object):
    """The state directory through one checked descriptor: every read, write and removal of
    the module, each error a one-line failure naming the file and the fix."""

    def __init__(self, module, create):
        self.module = module
        self.path = module.params["state_dir"]
        self.fd = open_state_dir(module, self.path, create=create)

    def fix(self, name):
        return "check %s (a root-owned directory, mode 0700, with room) and run the play again" % os.path.join(self.path, name)

    def read(self, name):
        return reported(self.module, "reading %s" % os.path.join(self.path, name), self.fix(name), read_at, self.fd, name)

    def write(self, name, data):
        reported(self.module, "writing %s" % os.path.join(self.path, name), self.fix(name), write_at, self.fd, name, data)

    def remove(self, name):
        return reported(self.module, "removing %s" % os.path.join(self.path, name), self.fix(name), remove_at, self.fd, name)

    def revert_entries(self, name):
        """A revert file's entries, or None when it is absent; a file that is not one fails the
        host naming it."""
        data = self.read(name)
        if data is None:
            return None
        try:
            entries = json.loads(data)
            keys = ("path", "from", "to")
            if not isinstance(entries, list) or not all(isinstance(e, dict) and all(isinstance(e.get(k), str) for k in keys) for e in entries):
                raise ValueError("not a list of {path, from, to} entries")
        except ValueError as e:
            self.module.fail_json(
                msg="%s is not a revert file corelane wrote (%s): compare it with the host (corelane topo), put the settings back by hand and remove it"
                % (os.path.join(self.path, name), e)
            )
        return entries

    def settle_leftover(self, names):
        """Merges the undo an apply killed half-way left in the `.next` file into the revert
        file, and removes it."""
        later = self.revert_entries(names["next"])
        if later is None:
            return
        earlier = self.revert_entries(names["revert"]) or []
        self.write(names["revert"], dump(merged_revert(earlier, later)))
        self.remove(names["next"])


def dump(entries):
    return json.dumps(entries, indent=2).encode()


def apply_with_revert(module, binary, state, names, plan_path, planned):
    """`corelane apply --yes`, its undo in the revert file first: the earlier entries with the
    dry run's changes added are written BEFORE the host changes; after, those corelane
    made. The report, or None and the error when corelane failed (it has put back the
    settings it had changed, and the revert file is as it was)."""
    earlier = state.revert_entries(names["revert"])
    state.write(names["revert"], dump(merged_revert(earlier or [], as_entries(planned))))
    args = [binary, "apply", plan_path, "--yes", "--json", "--revert", os.path.join(state.path, names["next"])]
    rc, out, err = module.run_command(args)
    if rc != 0:
        if earlier is None:
            state.remove(names["revert"])
        else:
            state.write(names["revert"], dump(earlier))
        state.remove(names["next"])
        return None, first_line(err)
    made = state.revert_entries(names["next"]) or []
    state.write(names["revert"], dump(merged_revert(earlier or [], made)))
    state.remove(names["next"])
    try:
        return json.loads(out), None
    except ValueError:
        return None, "corelane apply printed no JSON object (%r); the changes are made and their undo is in %s" % (out[:200], names["revert"])


def plan_draft(module, plan_bytes):
    draft = os.path.join(module.tmpdir, "plan.json")
    with open(draft, "wb") as f:
        f.write(plan_bytes)
    return draft


def applied(module, binary, names):
    nic, plan = module.params["nic"], module.params["plan"]
    planned_nic = plan.get("nic")
    if planned_nic != nic:
        module.fail_json(msg="the plan is for interface %s, not %s: make it with corelane_plan nic=%s" % (planned_nic, nic, nic))
    plan_bytes = (json.dumps(plan, indent=2, sort_keys=True) + "\n").encode()
    draft = reported(module, "writing the plan to a temporary file", "check the remote temporary directory", plan_draft, module, plan_bytes)
    review = {"changes": [], "skipped": []}
    if module.params["apply_settings"]:
        review = run_json(module, binary, ["apply", draft, "--json"], "corelane apply (dry run)")
    state = StateDir(module, create=not module.check_mode)
    earlier_plan = None
    if state.fd is not None:
        if not module.check_mode:
            state.settle_leftover(names)
        # A revert file that is not one fails the host before anything is written.
        state.revert_entries(names["revert"])
        earlier_plan = state.read(names["plan"])
    plan_new = earlier_plan != plan_bytes
    result = dict(
        changed=bool(review["changes"]) or plan_new,
        changes=review["changes"],
        skipped=review["skipped"],
        revert_file=os.path.join(state.path, names["revert"]),
        plan_file=os.path.join(state.path, names["plan"]),
        diff=diff_of(nic, review["changes"], "%s now", "%s as planned"),
    )
    if module.check_mode or not result["changed"]:
        module.exit_json(**result)
    if plan_new:
        state.write(names["plan"], plan_bytes)
    if review["changes"]:
        done, error = apply_with_revert(module, binary, state, names, result["plan_file"], review["changes"])
        if done is None:
            # corelane has put the settings back; the plan file goes back as it was too.
            if earlier_plan is None:
                state.remove(names["plan"])
            elif plan_new:
                state.write(names["plan"], earlier_plan)
            module.fail_json(msg="corelane apply failed, the host is as it was: %s" % error)
        result["changes"], result["skipped"] = done["changes"], done["skipped"]
        result["diff"] = diff_of(nic, done["changes"], "%s before", "%s applied")
    module.exit_json(**result)


def reverted(module, binary, names):
    nic = module.params["nic"]
    state = StateDir(module, create=False)
    result = dict(changed=False, changes=[], skipped=[], revert_file=os.path.join(state.path, names["revert"]), plan_file=os.path.join(state.path, names["plan"]))
    if state.fd is None:
        module.exit_json(msg="nothing applied here: no %s" % state.path, **result)
    if not module.check_mode:
        state.settle_leftover(names)
    has_revert = state.revert_entries(names["revert"]) is not None
    has_plan = state.read(names["plan"]) is not None
    if not has_revert and not has_plan:
        module.exit_json(msg="nothing applied here for %s" % nic, **result)
    if has_revert:
        check_corelane(module, binary)
        # corelane reads what the host holds now: only settings not at their saved value.
        args = ["revert", result["revert_file"], "--json"] + (["--dry-run"] if module.check_mode else [])
        undo = run_json(module, binary, args, "corelane revert")
        result["changes"], result["skipped"] = undo["changes"], undo["skipped"]
        result["diff"] = diff_of(nic, undo["changes"], "%s now", "%s restored")
    # Changed: a setting restored, or the module's files removed.
    result["changed"] = True
    if not module.check_mode:
        if has_revert:
            state.remove(names["revert"])
        state.remove(names["plan"])
    module.exit_json(**result)


def main():
    module = AnsibleModule(
        argument_spec=dict(
            nic=dict(type="str", required=True),
            state=dict(type="str", default="applied", choices=["applied", "reverted"]),
            plan=dict(type="dict"),
            apply_settings=dict(type="bool", default=True),
            bin=dict(type="path", default="/usr/local/bin/corelane"),
            state_dir=dict(type="path", default="/var/lib/corelane"),
        ),
        required_if=[("state", "applied", ("plan",))],
        supports_check_mode=True,
    )
    nic = module.params["nic"]
    if not NIC_NAME.match(nic) or nic in (".", ".."):
        module.fail_json(msg="%r is not an interface name this module takes: 1 to 15 of the characters A-Z a-z 0-9 _ . @ -" % nic[:64])
    names = dict(plan="plan-%s.json" % nic, revert="revert-%s.json" % nic, next=".revert-%s.next.json" % nic)
    binary = module.params["bin"]
    try:
        if module.params["state"] == "reverted":
            reverted(module, binary, names)
        check_corelane(module, binary)
        applied(module, binary, names)
    except Exception as e:  # noqa: BLE001 -- a failure in one line, never a traceback
        module.fail_json(msg="corelane_partition %s for %s failed: %s: %s; run the play again, and report it if it persists" % (module.params["state"], nic, type(e).__name__, e))


if __name__ == "__main__":
    main()
