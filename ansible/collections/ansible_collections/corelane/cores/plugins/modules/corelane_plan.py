#!/usr/bin/python
# -*- coding: utf-8 -*-
# The host's topology and a corelane plan for one of its interfaces, as facts.
from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: corelane_plan
short_description: The host's CPU and NIC topology and a corelane core partition plan, as facts
description:
  - Runs C(corelane topo --json) and C(corelane plan --nic NIC --format json) with the corelane
    on the host and returns both as facts, C(corelane_topology) and C(corelane_plan).
  - Changes nothing on the host.
version_added: "0.1.0"
options:
  nic:
    description: The network interface whose interrupts and queues the plan places.
    type: str
    required: true
  policy:
    description: How the plan places the interrupt, syscall and application CPUs.
    type: str
    choices: [spread, pack, fenced]
    default: spread
  lanes:
    description: How many application CPUs to use (all that remain when absent).
    type: int
  bin:
    description: The corelane binary on the host (checked against the version the module needs).
    type: path
    default: /usr/local/bin/corelane
attributes:
  check_mode:
    support: full
    description: The module changes nothing in any mode.
  diff_mode:
    support: none
notes:
  - Needs corelane 0.2.0 or newer on the host, with C(apply --json) (checked first).
  - Reads the topology as any user; the role runs it as root with the other modules.
author:
  - corelane developers
"""

EXAMPLES = r"""
- name: Plan eth0's partition
  corelane.cores.corelane_plan:
    nic: eth0
    policy: spread
    lanes: 4
- name: Show where the application runs
  ansible.builtin.debug:
    msg: "{{ corelane_plan.app_cpus }}"
"""

RETURN = r"""
ansible_facts:
  description: C(corelane_topology) (what C(corelane topo --json) prints) and C(corelane_plan)
    (what C(corelane plan --format json) prints).
  returned: success
  type: dict
corelane_version:
  description: The version of the corelane that answered.
  returned: success
  type: str
"""

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.corelane.cores.plugins.module_utils.corelane import (
    check_corelane,
    run_json,
)


def main():
    module = AnsibleModule(
        argument_spec=dict(
            nic=dict(type="str", required=True),
            policy=dict(type="str", default="spread", choices=["spread", "pack", "fenced"]),
            lanes=dict(type="int"),
            bin=dict(type="path", default="/usr/local/bin/corelane"),
        ),
        supports_check_mode=True,
    )
    binary = module.params["bin"]
    version = check_corelane(module, binary)
    topology = run_json(module, binary, ["topo", "--json"], "corelane topo")
    args = ["plan", "--nic", module.params["nic"], "--policy", module.params["policy"], "--format", "json"]
    if module.params["lanes"] is not None:
        args += ["--lanes", str(module.params["lanes"])]
    plan = run_json(module, binary, args, "corelane plan")
    module.exit_json(
        changed=False,
        corelane_version=version,
        ansible_facts=dict(corelane_topology=topology, corelane_plan=plan),
    )


if __name__ == "__main__":
    main()
