# -*- coding: utf-8 -*-
# A command line as a systemd unit's ExecStart= takes it (systemd.syntax(7), systemd.service(5)).
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

from ansible.errors import AnsibleFilterError

CONTROL = re.compile(r"[\x00-\x1f\x7f]")


def systemd_exec(words):
    """The words as one ExecStart= value that systemd splits back into exactly these words:
    each in double quotes, with `\\` and `"` escaped, `%` written `%%` (specifiers) and, in
    the arguments, `$` written `$$` (environment variables). The first word is the program:
    an absolute path, without `$` (systemd substitutes nothing there). A control character
    (a newline would end the line and start a directive of its own) is refused."""
    if isinstance(words, (str, bytes)) or not isinstance(words, (list, tuple)) or not words:
        raise AnsibleFilterError("systemd_exec takes a list of words (the program, then its arguments), not %r" % (words,))
    out = []
    for i, word in enumerate(words):
        if not isinstance(word, str):
            raise AnsibleFilterError("word %d of the command, %r, is not a string" % (i, word))
        if CONTROL.search(word):
            raise AnsibleFilterError("word %d of the command, %r, holds a control character (a newline?): a unit line cannot carry it" % (i, word))
        if i == 0 and (not word.startswith("/") or "$" in word):
            raise AnsibleFilterError("the program %r must be an absolute path without `$`" % word)
        quoted = word.replace("\\", "\\\\").replace('"', '\\"').replace("%", "%%")
        if i > 0:
            quoted = quoted.replace("$", "$$")
        out.append('"%s"' % quoted)
    return " ".join(out)


class FilterModule(object):
    def filters(self):
        return {"systemd_exec": systemd_exec}
