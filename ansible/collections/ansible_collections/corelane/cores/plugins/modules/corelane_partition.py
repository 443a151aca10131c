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
    the first apply.
  - If a change fails, corelane puts back the ones already made and the host fails alone,
    the error naming the setting.
  - The plan itself is kept as C(STATE_DIR/plan-NIC.json), for C(corelane run --plan).
  - With I(state=reverted), restores the saved values (C(corelane revert)) and removes the
    revert file and the plan; with neither on the host, nothing changes.
  - Check mode is corelane's dry run and changes nothing; C(--diff) shows each setting old and new.
version_added: "0.1.0"
options:
  nic:
    description: The network interface the plan is for.
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
skipped:
  description: Settings the kernel or the driver refuses on this device, with the reason.
  returned: always
  type: list
  elements: dict
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

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.corelane.cores.plugins.module_utils.corelane import (
    check_corelane,
    first_line,
    open_state_dir,
    read_at,
    remove_at,
    run_json,
    write_at,
)


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


def apply_with_revert(module, binary, dir_fd, names, plan_path):
    """`corelane apply --yes`, its undo saved in the revert file (merged with an earlier
    one's); the report, or None and the error when corelane failed (it has put back the
    settings it had changed)."""
    state_dir = module.params["state_dir"]
    earlier = read_at(dir_fd, names["revert"])
    target = names["revert"] if earlier is None else names["next"]
    args = [binary, "apply", plan_path, "--yes", "--json", "--revert", os.path.join(state_dir, target)]
    rc, out, err = module.run_command(args)
    if rc != 0:
        return None, first_line(err)
    if earlier is not None:
        later = json.loads(read_at(dir_fd, names["next"]) or b"[]")
        merged = merged_revert(json.loads(earlier), later)
        write_at(dir_fd, names["revert"], json.dumps(merged, indent=2).encode())
        remove_at(dir_fd, names["next"])
    return json.loads(out), None


def installed_plan(state_dir, name):
    """The plan file as the host holds it now, or None."""
    if not os.path.isdir(state_dir):
        return None
    fd = os.open(state_dir, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        return read_at(fd, name)
    finally:
        os.close(fd)


def applied(module, binary, names):
    nic, plan = module.params["nic"], module.params["plan"]
    planned_nic = plan.get("nic")
    if planned_nic != nic:
        module.fail_json(msg="the plan is for interface %s, not %s: make it with corelane_plan nic=%s" % (planned_nic, nic, nic))
    state_dir = module.params["state_dir"]
    plan_bytes = (json.dumps(plan, indent=2, sort_keys=True) + "\n").encode()
    draft = os.path.join(module.tmpdir, "plan.json")
    with open(draft, "wb") as f:
        f.write(plan_bytes)
    review = {"changes": [], "skipped": []}
    if module.params["apply_settings"]:
        review = run_json(module, binary, ["apply", draft, "--json"], "corelane apply (dry run)")
    earlier_plan = installed_plan(state_dir, names["plan"])
    plan_new = earlier_plan != plan_bytes
    result = dict(
        changed=bool(review["changes"]) or plan_new,
        changes=review["changes"],
        skipped=review["skipped"],
        revert_file=os.path.join(state_dir, names["revert"]),
        plan_file=os.path.join(state_dir, names["plan"]),
        diff=diff_of(nic, review["changes"], "%s now", "%s as planned"),
    )
    if module.check_mode or not result["changed"]:
        module.exit_json(**result)
    dir_fd = open_state_dir(module, state_dir)
    if plan_new:
        write_at(dir_fd, names["plan"], plan_bytes)
    if review["changes"]:
        done, error = apply_with_revert(module, binary, dir_fd, names, result["plan_file"])
        if done is None:
            # corelane has put the settings back; the plan file goes back as it was too.
            if earlier_plan is None:
                remove_at(dir_fd, names["plan"])
            elif plan_new:
                write_at(dir_fd, names["plan"], earlier_plan)
            module.fail_json(msg="corelane apply failed, the host is as it was: %s" % error)
        result["changes"], result["skipped"] = done["changes"], done["skipped"]
        result["diff"] = diff_of(nic, done["changes"], "%s before", "%s applied")
    module.exit_json(**result)


def reverted(module, binary, names):
    nic, state_dir = module.params["nic"], module.params["state_dir"]
    result = dict(changed=False, changes=[], skipped=[], revert_file=os.path.join(state_dir, names["revert"]), plan_file=os.path.join(state_dir, names["plan"]))
    if not os.path.isdir(state_dir):
        module.exit_json(msg="nothing applied here: no %s" % state_dir, **result)
    dir_fd = open_state_dir(module, state_dir)
    has_revert = read_at(dir_fd, names["revert"]) is not None
    has_plan = read_at(dir_fd, names["plan"]) is not None
    if not has_revert and not has_plan:
        module.exit_json(msg="nothing applied here for %s" % nic, **result)
    result["changed"] = True
    if has_revert:
        check_corelane(module, binary)
        args = ["revert", result["revert_file"], "--json"] + (["--dry-run"] if module.check_mode else [])
        undo = run_json(module, binary, args, "corelane revert")
        result["changes"], result["skipped"] = undo["changes"], undo["skipped"]
        result["diff"] = diff_of(nic, undo["changes"], "%s applied", "%s restored")
    if not module.check_mode:
        if has_revert:
            remove_at(dir_fd, names["revert"])
        remove_at(dir_fd, names["plan"])
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
    if not nic or len(nic) > 15 or any(ch in nic for ch in "/: \t\n\0") or nic in (".", ".."):
        module.fail_json(msg="`%s` is not an interface name: 1 to 15 characters, none of them '/', ':', whitespace or NUL" % nic)
    names = dict(plan="plan-%s.json" % nic, revert="revert-%s.json" % nic, next=".revert-%s.next.json" % nic)
    binary = module.params["bin"]
    if module.params["state"] == "reverted":
        reverted(module, binary, names)
    check_corelane(module, binary)
    applied(module, binary, names)


if __name__ == "__main__":
    main()
