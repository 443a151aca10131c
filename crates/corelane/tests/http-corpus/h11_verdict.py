"""Prints, for every corpus file given, what Python's h11 makes of it as a server:
`NAME accept` (a request, with its body framing settled), `NAME incomplete` or `NAME reject`.
The independent parser corelane's is checked against (tests/http_protocol.rs)."""
import sys

import h11

for path in sys.argv[1:]:
    data = open(path, "rb").read()
    conn = h11.Connection(h11.SERVER)
    conn.receive_data(data)
    verdict = "incomplete"
    try:
        event = conn.next_event()
        if isinstance(event, h11.Request):
            verdict = "accept"
            # Body framing errors surface when the body is read.
            while True:
                event = conn.next_event()
                if event is h11.NEED_DATA or isinstance(event, (h11.EndOfMessage, h11.ConnectionClosed)):
                    break
    except h11.RemoteProtocolError:
        verdict = "reject"
    print(path.rsplit("/", 1)[-1].removesuffix(".http"), verdict)
